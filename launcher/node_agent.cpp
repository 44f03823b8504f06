// The node agent: plan the local ranks, then supervise them.
#include "launcher/node_agent.h"

#include <algorithm>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <iostream>

#include "dsx/error.h"
#include "launcher/core_binding.h"
#include "launcher/env_export.h"
#include "launcher/restart_loop.h"
#include "launcher/shm_cleanup.h"

namespace dsx::launcher {
namespace {

bool launcher_on_terminal() { return ::isatty(STDOUT_FILENO) == 1; }

int terminal_columns() {
  struct winsize size {};
  if (::ioctl(STDOUT_FILENO, TIOCGWINSZ, &size) == 0 && size.ws_col > 0) return size.ws_col;
  return 80;
}


std::string local_timestamp() {
  std::time_t now = std::time(nullptr);
  std::tm tm{};
  ::localtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y%m%d%H%M%S", &tm);
  return buf;
}

void prepare_log_dir(const std::string& dir) {
  std::error_code ec;
  if (std::filesystem::exists(dir, ec) && !std::filesystem::is_directory(dir, ec)) {
    throw Error(ErrorKind::Usage, "--enable_each_rank_log " + dir + " is a file, not a directory");
  }
  std::filesystem::create_directories(dir, ec);
  if (ec) throw Error(ErrorKind::Io, "--enable_each_rank_log: cannot create " + dir + ": " + ec.message());
}

// DeepSpeed's pid file /tmp/<runner pid>.deepspeed, removed again when the agent ends.
class PidFile {
 public:
  explicit PidFile(const std::string& runner_pid) {
    if (runner_pid.empty()) return;
    path_ = "/tmp/" + runner_pid + ".deepspeed";
    FILE* f = std::fopen(path_.c_str(), "wx");
    if (!f) {
      std::string why = errno == EEXIST ? "it already exists (another launch with the same runner pid?)" : std::strerror(errno);
      path_.clear();
      throw Error(ErrorKind::Io, "--save_pid: cannot create /tmp/" + runner_pid + ".deepspeed: " + why);
    }
    std::fprintf(f, "%d", static_cast<int>(::getpid()));
    std::fclose(f);
    std::cout << "launcher pid: " << ::getpid() << std::endl;
  }
  ~PidFile() {
    if (!path_.empty()) ::unlink(path_.c_str());
  }
  PidFile(const PidFile&) = delete;
  PidFile& operator=(const PidFile&) = delete;

 private:
  std::string path_;
};

}  // namespace

std::vector<Member> rank_members(const AgentOptions& o, const std::string& python, const std::string& log_stamp) {
  auto placements = place_ranks(o.world, o.node_rank, o.local_rank_rule);
  std::vector<int> cores;
  if (o.bind_cores_to_rank) {
    if (!env_value(o.base_env, "KMP_AFFINITY").empty()) {
      throw Error(ErrorKind::Usage, "KMP_AFFINITY is set and would fight --bind_cores_to_rank; unset one of them");
    }
    cores = o.bind_core_list.empty() ? available_cores() : parse_core_list(o.bind_core_list);
  }
  std::vector<Member> members;
  for (const auto& p : placements) {
    Member m;
    m.is_rank = true;
    m.name = "rank " + std::to_string(p.rank);
    m.prefix = "[rank" + std::to_string(p.rank) + "]: ";
    m.spawn.argv = rank_argv(o.program, p.local_rank, python);
    m.spawn.env = o.base_env;
    for (const auto& [k, v] : rank_environment(o.world, o.node_rank, p, o.master_addr, o.master_port)) env_set(m.spawn.env, k, &v);
    const std::string restarts = std::to_string(o.restart_count), max_restarts = std::to_string(o.max_restarts);
    env_set(m.spawn.env, "TORCHELASTIC_RESTART_COUNT", &restarts);
    env_set(m.spawn.env, "TORCHELASTIC_MAX_RESTARTS", &max_restarts);
    if (o.bind_cores_to_rank) {
      m.spawn.cpus = cores_for_rank(cores, static_cast<int>(placements.size()), p.index);
      std::string threads = std::to_string(m.spawn.cpus.size());
      env_set(m.spawn.env, "OMP_NUM_THREADS", &threads);
    } else if (placements.size() > 1 && env_value(o.base_env, "OMP_NUM_THREADS").empty()) {
      // As torchrun does: ranks sharing a node must not each start a thread per core. dsx gives
      // each rank its share of the cores (OpenBLAS follows OMP_NUM_THREADS too).
      const size_t share = std::max<size_t>(1, available_cores().size() / placements.size());
      std::string threads = std::to_string(share);
      env_set(m.spawn.env, "OMP_NUM_THREADS", &threads);
    }
    if (launcher_on_terminal()) {
      // The ranks write into a pipe, but a person watches: let a progress bar draw (dsx train).
      std::string one = "1", columns = std::to_string(terminal_columns());
      env_set(m.spawn.env, "DSX_LAUNCHER_TTY", &one);
      if (env_value(o.base_env, "COLUMNS").empty()) env_set(m.spawn.env, "COLUMNS", &columns);
    }
    if (o.each_rank_log != "None") {
      m.spawn.log_path = (std::filesystem::path(o.each_rank_log) / (log_stamp + "_rank" + std::to_string(p.rank) + ".log")).string();
    }
    members.push_back(std::move(m));
  }
  return members;
}

// One start of the node's ranks; `restart` > 0 names the log files apart from earlier starts'.
Outcome run_ranks_once(const AgentOptions& o, int restart) {
  const std::string stamp = local_timestamp() + (restart > 0 ? "_restart" + std::to_string(restart) : "");
  auto members = rank_members(o, find_python(), stamp);
  SupervisorOptions s;
  s.kill_grace_s = o.kill_grace_s;
  s.tether_parent = o.tethered;
  s.tether_stdin = o.tether_stdin;
  s.quiet = o.quiet;
  s.stopped_rank_timeout_s = stopped_rank_timeout_from(o.base_env);
  s.hung_step_timeout_s = s.stopped_rank_timeout_s;
  return supervise(std::move(members), s);
}

int run_node_agent(const AgentOptions& o) {
  // A remote agent outlives its runner's connection long enough to stop its ranks.
  if (o.tethered) ::signal(SIGPIPE, SIG_IGN);
  if (o.each_rank_log != "None") prepare_log_dir(o.each_rank_log);
  remove_orphaned_shm_regions();  // left by ranks of earlier jobs that were killed
  PidFile pid_file(o.save_pid);
  if (place_ranks(o.world, o.node_rank, o.local_rank_rule).empty()) {
    if (!o.quiet) std::cerr << "dsx launch: node " << o.node_rank << " has no slots; nothing to start" << std::endl;
    return 0;
  }
  if (o.tethered) {
    // The runner restarts remote nodes (all of them, with the next restart count).
    const Outcome outcome = run_ranks_once(o, o.restart_count);
    // One line the runner recognises even through pdsh's "host: " prefix.
    if (outcome.exit_code != 0)
      std::cerr << kAgentFailureMarker << outcome.exit_code << " node=" << o.node_rank << " (" << outcome.reason << ")" << std::endl;
    return outcome.exit_code;
  }
  return run_with_restarts(o.max_restarts, o.quiet, [&](int restart) {
    AgentOptions attempt = o;
    attempt.restart_count = restart;
    return run_ranks_once(attempt, restart);
  });
}

}  // namespace dsx::launcher
