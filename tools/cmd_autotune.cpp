// `dsx autotune` (and `dsx launch --autotuning tune|run`): finds the ZeRO stage and micro-batch /
// accumulation split of a `dsx train` job's global batch that trains fastest within a memory
// limit, by real trial jobs (engine/autotune/search.h decides, tools/autotune_trials.cpp runs),
// and writes the winning ds_config with the table it measured.
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <iostream>
#include <sstream>

#include "dsx/error.h"
#include "dsx/json_input.h"
#include "dsx/join.h"
#include "dsx/master_port.h"
#include "tools/autotune/config_variant.h"
#include "tools/autotune/search.h"
#include "checkpoint/durable_file.h"
#include "config/ds_config.h"
#include "config/json.h"
#include "launcher/launch.h"
#include "launcher/rank_command.h"
#include "launcher/shell_words.h"
#include "tools/autotune_trials.h"
#include "tools/cli.h"
#include "tools/launch_args.h"

namespace dsx::tools {
namespace {

namespace at = autotune;

constexpr const char* kUsage =
    "dsx autotune [autotune flags] [dsx launch flags] dsx train --deepspeed_config FILE [dsx train flags]\n\n"
    "Finds the largest micro-batch that fits per ZeRO stage (memory model from a one-step probe,\n"
    "confirmed by probes), times the largest splits of the config's global batch at each stage, and\n"
    "writes the fastest as <results_dir>/ds_config_optimal.json with the table (summary.md) and the\n"
    "command (cmd_optimal.txt). The config's autotuning block sets results_dir, exps_dir, metric,\n"
    "start/end_profile_step, min/max_train_micro_batch_size_per_gpu and num_tuning_micro_batch_sizes.\n\n"
    "autotune flags:\n"
    "  --device_memory SIZE   memory one rank may hold, e.g. 16GiB (default: DSX_DEVICE_MEMORY, else 90%\n"
    "                         of this host's available memory shared by its ranks)\n"
    "  --stages LIST          ZeRO stages to compare, e.g. 1,2,3 (default: the config's stage if it names\n"
    "                         one, else 0,1,2,3)\n"
    "  --trial_timeout SECS   stop a trial that runs longer (default 600)\n"
    "  --results_dir DIR      default: autotuning.results_dir\n"
    "  --exps_dir DIR         one folder per trial with its config, log and metrics (default:\n"
    "                         autotuning.exps_dir)\n";

struct AutotuneFlags {
  std::optional<std::string> device_memory, stages, results_dir, exps_dir;
  int trial_timeout_s = 600;
};

// dsx train's flags that every trial sets itself (value-taking, all of them).
bool trial_owned(const std::string& flag) {
  static const char* owned[] = {"--steps", "--epochs", "--save", "--save_interval", "--progress", "--samples",
                                "--eval_interval", "--device_memory", "--deepspeed_config"};
  for (const char* o : owned)
    if (flag == o) return true;
  return false;
}

// Removes `--name value` / `--name=value` of every flag `owned` says yes to; returns what was
// removed, by name (the last value wins).
std::map<std::string, std::string> take_flags(std::vector<std::string>& words,
                                              const std::function<bool(const std::string&)>& owned) {
  std::map<std::string, std::string> taken;
  std::vector<std::string> kept;
  for (size_t i = 0; i < words.size(); ++i) {
    const std::string& w = words[i];
    const size_t eq = w.find('=');
    const std::string name = w.substr(0, eq);
    if (w.rfind("--", 0) != 0 || !owned(name)) {
      kept.push_back(w);
    } else if (eq != std::string::npos) {
      taken[name] = w.substr(eq + 1);
    } else if (i + 1 < words.size()) {
      taken[name] = words[++i];
    } else {
      throw Error(ErrorKind::Usage, name + " needs a value");
    }
  }
  words = kept;
  return taken;
}

std::vector<int> parse_stages(const std::string& text) {
  std::vector<int> stages;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');) {
    if (item.size() != 1 || item[0] < '0' || item[0] > '3') {
      throw Error(ErrorKind::Usage, "dsx autotune: --stages '" + text + "': give ZeRO stages 0-3 separated by commas");
    }
    stages.push_back(item[0] - '0');
  }
  if (stages.empty()) throw Error(ErrorKind::Usage, "dsx autotune: --stages is empty");
  return stages;
}

// 90% of MemAvailable shared by the ranks of this host: the budget of a CPU run.
size_t default_memory_limit(int ranks_here) {
  std::ifstream in("/proc/meminfo");
  std::string key;
  size_t kib = 0;
  while (in >> key) {
    if (key == "MemAvailable:") {
      in >> kib;
      break;
    }
    in.ignore(1 << 10, '\n');
  }
  if (kib == 0) throw Error(ErrorKind::Usage, "dsx autotune: cannot read MemAvailable from /proc/meminfo; give --device_memory");
  return static_cast<size_t>(static_cast<double>(kib) * 1024 * 0.9 / std::max(1, ranks_here));
}

std::string self_path() {
  std::error_code ec;
  auto p = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) throw Error(ErrorKind::Io, "dsx autotune: cannot find its own binary (/proc/self/exe)");
  return p.string();
}

bool names_a_stage(const std::string& text, const std::string& path) {
  const config::json::Value root = config::json::parse(text, path);
  const config::json::Value* z = root.type == config::json::Type::Object ? root.find("zero_optimization") : nullptr;
  return z && z->type == config::json::Type::Object && z->find("stage");
}

// The job to tune, as the user wrote it: `[dsx launch flags] dsx train [dsx train flags]`.
struct TunedJob {
  launcher::LaunchOptions launch;
  std::vector<std::string> launch_words;  // the runner flags as given, --master_port included
  std::vector<std::string> train_words;   // dsx train's flags as given
};

TunedJob parse_job(const std::vector<std::string>& words) {
  TunedJob job;
  po::options_description launch_flags = launch_options(job.launch);
  std::vector<std::string> argv_words = {"dsx autotune"};
  argv_words.insert(argv_words.end(), words.begin(), words.end());
  std::vector<char*> argv;
  for (auto& w : argv_words) argv.push_back(w.data());
  const int program_at = find_program(static_cast<int>(argv.size()), argv.data(), launch_flags);
  parse_args(program_at, argv.data(), kUsage, launch_flags);
  const std::vector<std::string> program(argv_words.begin() + program_at, argv_words.end());
  if (program.size() < 2 || std::filesystem::path(program[0]).filename() != "dsx" || program[1] != "train") {
    throw Error(ErrorKind::Usage, "dsx autotune tunes a `dsx train` job: dsx autotune [flags] [dsx launch flags] dsx "
                                  "train --deepspeed_config FILE [...]");
  }
  job.launch_words.assign(argv_words.begin() + 1, argv_words.begin() + program_at);
  job.train_words.assign(program.begin() + 2, program.end());
  return job;
}

// The user's job as trials repeat it: the binary, the runner flags, the port and the train flags
// without those a trial sets itself (kept in `owned`), the base ds_config, and the world.
struct TrialPlan {
  TrialSetup setup;
  std::map<std::string, std::string> owned;
  launcher::PlannedWorld world;
};

TrialPlan plan_trials(const TunedJob& job) {
  TrialPlan plan;
  TrialSetup& setup = plan.setup;
  setup.launch_words = job.launch_words;
  const auto port = take_flags(setup.launch_words, [](const std::string& f) { return f == "--master_port"; });
  setup.train_words = job.train_words;
  plan.owned = take_flags(setup.train_words, trial_owned);
  if (!plan.owned.count("--deepspeed_config")) throw Error(ErrorKind::Usage, "dsx autotune: dsx train needs --deepspeed_config FILE");
  setup.dsx = self_path();
  plan.world = launcher::planned_world(job.launch);
  // A free port per trial where only this machine is involved; across nodes the user's (or
  // DeepSpeed's default) port, reused by one trial after another.
  setup.master_port = port.count("--master_port") ? std::stoi(port.at("--master_port")) : plan.world.multi_node ? kDefaultMasterPort : 0;
  setup.base_path = plan.owned["--deepspeed_config"];
  setup.base_text = read_bounded_file(setup.base_path, config::json::kMaxConfigBytes);
  setup.world = plan.world.ranks;
  return plan;
}

// The stages to compare: --stages, else the config's stage where it names one, else all four.
std::vector<int> stages_to_try(const AutotuneFlags& flags, const TrialSetup& setup, const config::EngineConfig& base) {
  if (flags.stages) return parse_stages(*flags.stages);
  if (names_a_stage(setup.base_text, setup.base_path)) return {static_cast<int>(base.zero_optimization.stage)};
  return {0, 1, 2, 3};
}

at::TuneRequest tune_request(const AutotuneFlags& flags, const TrialSetup& setup, const config::EngineConfig& base) {
  const config::AutotuningConfig& tuning = base.autotuning;
  at::TuneRequest request;
  request.world = setup.world;
  request.train_batch_size = base.train_batch_size;
  request.stages = stages_to_try(flags, setup, base);
  request.min_micro = tuning.min_train_micro_batch_size_per_gpu;
  request.max_micro = tuning.max_train_micro_batch_size_per_gpu;
  if (tuning.max_train_batch_size) request.max_micro = std::min(request.max_micro, *tuning.max_train_batch_size / setup.world);
  request.splits_per_stage = tuning.num_tuning_micro_batch_sizes;
  request.metric = at::metric_named(tuning.metric);
  return request;
}

// The memory one rank may hold: autotune's --device_memory, dsx train's, DSX_DEVICE_MEMORY, else
// this host's share.
size_t memory_limit(const AutotuneFlags& flags, const std::map<std::string, std::string>& owned,
                    const launcher::PlannedWorld& world) {
  const char* env_memory = std::getenv("DSX_DEVICE_MEMORY");
  if (flags.device_memory) return parse_byte_size(*flags.device_memory, "dsx autotune: --device_memory");
  if (owned.count("--device_memory")) return parse_byte_size(owned.at("--device_memory"), "dsx train: --device_memory");
  if (env_memory && *env_memory) return parse_byte_size(env_memory, "DSX_DEVICE_MEMORY");
  return default_memory_limit(std::max(1, world.ranks / std::max(1, world.nodes)));
}

// One line per trial as it ends: its outcome, peak memory and, for timed trials, throughput.
void print_trial(int count, const at::Experiment& e, const at::Trial& t) {
  std::ostringstream line;
  line.precision(3);
  line << "  [" << count << "] " << e.name << ": " << at::to_string(t.status);
  if (t.status == at::TrialStatus::Ok) {
    line << ", peak " << t.metrics.peak_memory_bytes / 1e6 << " MB";
    if (e.timed) line << ", " << t.metrics.throughput << " samples/s";
  }
  if (t.seconds > 0 || t.status != at::TrialStatus::Ok) {
    line << " (" << t.seconds << " s)";
  } else {
    line << " (result reused: autotuning.overwrite is false)";
  }
  std::cout << line.str() << std::endl;
}

at::TuneResult run_trials(const at::TuneRequest& request, const TrialSetup& setup, const std::string& metric) {
  std::cout << "dsx autotune: " << setup.world << " rank(s), global batch " << request.train_batch_size
            << ", ZeRO stage(s) " << join(request.stages, ",") << ", at most " << setup.memory_limit / 1e6
            << " MB per rank, metric " << metric << "; trials in " << setup.exps_dir << "/" << std::endl;
  int count = 0;
  return at::tune(request, [&](const at::Experiment& e) {
    at::Trial t = run_trial(setup, e);
    print_trial(++count, e, t);
    return t;
  });
}

// The tuned job: the user's command with the optimal config.
std::vector<std::string> tuned_command(const std::string& dsx, const TunedJob& job, const std::string& optimal) {
  std::vector<std::string> rest = job.train_words;
  take_flags(rest, [](const std::string& f) { return f == "--deepspeed_config"; });
  std::vector<std::string> c = {dsx, "launch"};
  c.insert(c.end(), job.launch_words.begin(), job.launch_words.end());
  c.insert(c.end(), {dsx, "train", "--deepspeed_config", optimal});
  c.insert(c.end(), rest.begin(), rest.end());
  return c;
}

// Writes <results_dir>/ds_config_optimal.json, summary.md and cmd_optimal.txt and says so.
void write_results(const std::string& results_dir, const std::string& optimal, const std::string& report,
                   const at::Experiment& best, const at::TuneRequest& request, const TrialSetup& setup,
                   const TunedJob& job) {
  checkpoint::make_directories(results_dir);
  checkpoint::write_file_durably(
      optimal, at::config_variant(setup.base_text, setup.base_path,
                                  {best.stage, best.micro_batch, best.accumulation, request.train_batch_size}));
  checkpoint::write_file_durably(results_dir + "/summary.md", report);
  // As the user can type it: `dsx` where it is on PATH, else this binary's path (a build tree).
  const std::vector<std::string> command =
      tuned_command(launcher::resolve_program("dsx").empty() ? setup.dsx : std::string("dsx"), job, optimal);
  checkpoint::write_file_durably(results_dir + "/cmd_optimal.txt", launcher::shell_join(command) + "\n");
  std::cout << "\nbest: " << best.name << " (ZeRO stage " << best.stage << ", micro-batch " << best.micro_batch
            << " x accumulation " << best.accumulation << " x " << setup.world << " ranks)\nwritten: " << optimal
            << ", " << results_dir << "/summary.md, " << results_dir << "/cmd_optimal.txt\nrun it: "
            << launcher::shell_join(command) << std::endl;
}

// `dsx launch --autotuning run`: replaces this process with the tuned job.
[[noreturn]] void exec_tuned(const TrialSetup& setup, const TunedJob& job, const std::string& optimal) {
  std::cout << "\ndsx launch --autotuning run: training with the tuned config" << std::endl;
  std::vector<std::string> exec_words = tuned_command(setup.dsx, job, optimal);
  std::vector<char*> exec_argv;
  for (auto& w : exec_words) exec_argv.push_back(w.data());
  exec_argv.push_back(nullptr);
  ::execv(setup.dsx.c_str(), exec_argv.data());
  throw Error(ErrorKind::Launch, std::string("dsx autotune: could not start the tuned run: ") + std::strerror(errno));
}

int autotune(const AutotuneFlags& flags, const std::vector<std::string>& words, bool then_train) {
  const TunedJob job = parse_job(words);
  TrialPlan plan = plan_trials(job);
  TrialSetup& setup = plan.setup;
  config::ConfigInputs inputs;
  inputs.world_size = setup.world;
  const config::EngineConfig base = config::read_ds_config_file(setup.base_path, inputs);
  const config::AutotuningConfig& tuning = base.autotuning;
  at::TuneRequest request = tune_request(flags, setup, base);
  setup.memory_limit = memory_limit(flags, plan.owned, plan.world);
  request.memory_limit = static_cast<int64_t>(setup.memory_limit);
  setup.train_batch_size = base.train_batch_size;
  setup.start_profile_step = tuning.start_profile_step;
  setup.end_profile_step = tuning.end_profile_step;
  setup.timeout = std::chrono::seconds(flags.trial_timeout_s);
  setup.reuse_results = !tuning.overwrite;
  const std::string results_dir = flags.results_dir.value_or(tuning.results_dir);
  setup.exps_dir = flags.exps_dir.value_or(tuning.exps_dir);

  const at::TuneResult result = run_trials(request, setup, tuning.metric);
  const std::string report = at::format_report(request, result);
  std::cout << "\n" << report;
  if (!result.best) {
    throw Error(ErrorKind::OutOfMemory, "dsx autotune: no split of the global batch " +
                                            std::to_string(request.train_batch_size) + " fits in " +
                                            std::to_string(setup.memory_limit / 1000000) +
                                            " MB per rank at the stages tried; allow more memory, more ranks, "
                                            "or a higher ZeRO stage (table above)");
  }
  const at::Experiment& best = result.trials[*result.best].experiment;
  const std::string optimal = results_dir + "/ds_config_optimal.json";
  write_results(results_dir, optimal, report, best, request, setup, job);
  if (then_train) exec_tuned(setup, job, optimal);
  return 0;
}

}  // namespace

int run_autotune_from_launch(const std::string& mode, const std::vector<std::string>& words) {
  if (mode != "tune" && mode != "run") {
    throw Error(ErrorKind::Usage, "dsx launch --autotuning '" + mode + "': choose tune (write the tuned config) or "
                                  "run (tune, then train with it)");
  }
  return autotune(AutotuneFlags{}, words, mode == "run");
}

int run_autotune(int argc, char** argv) {
  AutotuneFlags flags;
  // Autotune's own flags may come before or among the launch flags: take them from every word
  // before the program, and pass the rest on.
  launcher::LaunchOptions unused;
  po::options_description known = launch_options(unused);
  for (const char* name : {"device_memory", "stages", "trial_timeout", "results_dir", "exps_dir"})
    known.add_options()(name, po::value<std::string>());
  const size_t program_at = static_cast<size_t>(find_program(argc, argv, known) - 1);
  std::vector<std::string> words(argv + 1, argv + argc), rest;
  for (size_t i = 0; i < words.size(); ++i) {
    const std::string& w = words[i];
    if (i >= program_at) {
      rest.push_back(w);
      continue;
    }
    if (w == "--help" || w == "-h") {
      std::cout << "usage: " << kUsage;
      return 0;
    }
    const size_t eq = w.find('=');
    const std::string name = w.substr(0, eq);
    std::optional<std::string>* slot = name == "--device_memory" ? &flags.device_memory
                                       : name == "--stages"      ? &flags.stages
                                       : name == "--results_dir" ? &flags.results_dir
                                       : name == "--exps_dir"    ? &flags.exps_dir
                                                                 : nullptr;
    if (!slot && name != "--trial_timeout") {
      rest.push_back(w);
      continue;
    }
    std::string value;
    if (eq != std::string::npos) {
      value = w.substr(eq + 1);
    } else if (i + 1 < words.size()) {
      value = words[++i];
    } else {
      throw Error(ErrorKind::Usage, "dsx autotune: " + name + " needs a value (see --help)");
    }
    if (slot) {
      *slot = value;
    } else {
      char* end = nullptr;
      const long seconds = std::strtol(value.c_str(), &end, 10);
      if (*end || seconds < 1) throw Error(ErrorKind::Usage, "dsx autotune: --trial_timeout '" + value + "' is not a number of seconds");
      flags.trial_timeout_s = static_cast<int>(seconds);
    }
  }
  return autotune(flags, rest, false);
}

}  // namespace dsx::tools
