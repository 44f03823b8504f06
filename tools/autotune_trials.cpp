// Running one autotune trial as a real job (see autotune_trials.h).
#include "tools/autotune_trials.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <optional>
#include <fstream>
#include <iterator>
#include <thread>

#include "dsx/error.h"
#include "tools/autotune/config_variant.h"
#include "checkpoint/durable_file.h"
#include "launcher/env_export.h"
#include "launcher/process.h"
#include "models/data/token_loader.h"

namespace dsx::tools {
namespace {

namespace at = autotune;
using Clock = std::chrono::steady_clock;

constexpr int kOutOfMemoryExit = 3;  // tools/main.cpp

// Waits for `pid` until `deadline`; past it stops the job (SIGTERM to its tree, SIGKILL after a
// grace period). Returns the wait status, or nullopt when it had to be stopped.
std::optional<int> wait_until(pid_t pid, Clock::time_point deadline) {
  int status = 0;
  for (;;) {
    const pid_t done = ::waitpid(pid, &status, WNOHANG);
    if (done == pid) return status;
    if (done < 0 && errno != EINTR) return status;
    if (Clock::now() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  launcher::signal_tree(pid, SIGTERM);
  const auto grace = Clock::now() + std::chrono::seconds(10);
  while (::waitpid(pid, &status, WNOHANG) == 0) {
    if (Clock::now() >= grace) {
      launcher::signal_tree(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return std::nullopt;
}

// The line of the log that says what went wrong: dsx's own error line if there is one, else the
// launcher's last word.
std::string failure_line(const std::string& log_path) {
  std::ifstream in(log_path);
  std::string line, error, last;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    last = line;
    if (line.find("dsx: ") != std::string::npos && line.find(" error: ") != std::string::npos) error = line;
  }
  return error.empty() ? last : error;
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

bool log_says(const std::string& log_path, const std::string& what) {
  std::ifstream in(log_path);
  std::string line;
  while (std::getline(in, line)) {
    if (line.find(what) != std::string::npos) return true;
  }
  return false;
}

}  // namespace

at::Trial run_trial(const TrialSetup& s, const at::Experiment& e) {
  const std::string dir = s.exps_dir + "/" + e.name;
  std::filesystem::create_directories(dir);
  const std::string config_path = dir + "/ds_config.json", metrics_path = dir + "/metrics.json",
                    log_path = dir + "/log.txt";
  at::ConfigChoice choice{e.stage, e.micro_batch, e.accumulation,
                          e.timed ? s.train_batch_size : e.micro_batch * s.world};
  at::TrialProfile profile{std::filesystem::absolute(metrics_path).string(), e.timed ? s.start_profile_step : 0,
                           e.timed ? s.end_profile_step : 1};
  const std::string config = at::config_variant(s.base_text, s.base_path, choice, profile);
  if (s.reuse_results && std::filesystem::exists(metrics_path) && read_text(config_path) == config) {
    at::Trial reused;
    reused.experiment = e;
    reused.metrics = engine::read_profile_metrics(metrics_path);
    reused.status = at::TrialStatus::Ok;
    return reused;
  }
  std::filesystem::remove(metrics_path);
  std::filesystem::remove(log_path);
  checkpoint::write_file_durably(config_path, config);

  launcher::SpawnSpec spawn;
  spawn.argv = {s.dsx, "launch"};
  spawn.argv.insert(spawn.argv.end(), s.launch_words.begin(), s.launch_words.end());
  spawn.argv.insert(spawn.argv.end(), {"--master_port", std::to_string(s.master_port), s.dsx, "train",
                                       "--deepspeed_config", config_path});
  spawn.argv.insert(spawn.argv.end(), s.train_words.begin(), s.train_words.end());
  spawn.argv.insert(spawn.argv.end(), {"--progress", "plain", "--samples", "0", "--eval_interval", "0",
                                       "--device_memory", std::to_string(s.memory_limit)});
  spawn.env = launcher::current_environment();
  spawn.log_path = log_path;

  at::Trial trial;
  trial.experiment = e;
  const auto start = Clock::now();
  launcher::Child child = launcher::spawn_child(spawn);
  if (child.exec_errno) {
    trial.error = "could not start " + s.dsx + ": " + std::strerror(child.exec_errno);
    return trial;
  }
  const std::optional<int> status = wait_until(child.pid, start + s.timeout);
  trial.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  if (!status) {
    trial.status = at::TrialStatus::TimedOut;
    trial.error = "stopped after " + std::to_string(s.timeout.count()) + " s (--trial_timeout); log: " + log_path;
    return trial;
  }
  const int code = WIFEXITED(*status) ? WEXITSTATUS(*status) : 128 + WTERMSIG(*status);
  if (code == 0 && std::filesystem::exists(metrics_path)) {
    trial.metrics = engine::read_profile_metrics(metrics_path);
    trial.status = at::TrialStatus::Ok;
  } else if (code == kOutOfMemoryExit || code == 128 + SIGKILL || log_says(log_path, "out_of_memory error")) {
    trial.status = at::TrialStatus::OutOfMemory;
    trial.error = failure_line(log_path);
  } else if (log_says(log_path, models::kFewerTokensThanOneBatch)) {
    trial.status = at::TrialStatus::DataTooSmall;
    trial.error = failure_line(log_path);
  } else {
    trial.error = failure_line(log_path) + " (exit code " + std::to_string(code) + "; log: " + log_path + ")";
  }
  return trial;
}

}  // namespace dsx::tools
