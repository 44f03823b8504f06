// `dsx launch`: a drop-in for the `deepspeed` launcher. Flags come first, then the program and
// its arguments, passed through untouched (DeepSpeed's argparse REMAINDER). With --world_info it
// is the per-node agent (DeepSpeed's `deepspeed.launcher.launch`); with --dsx_rank_shim it is the
// per-rank wrapper used under mpirun and srun. The work is done in launcher/.
#include <cctype>
#include <cstring>
#include <iostream>

#include "dsx/error.h"
#include "dsx/master_port.h"
#include "launcher/env_export.h"
#include "launcher/launch.h"
#include "launcher/world_info.h"
#include "tools/cli.h"
#include "tools/launch_args.h"

namespace dsx::tools {

using launcher::LaunchOptions;

po::options_description launch_options(LaunchOptions& o) {
  po::options_description d("dsx launch (same flags as the deepspeed launcher)");
  d.add_options()
      ("hostfile,H", po::value(&o.hostfile)->default_value(o.hostfile), "hostfile: one 'HOST slots=N' per line")
      ("include,i", po::value(&o.include)->default_value(""), "use only these hosts/slots: HOST[:SLOT,..][@HOST..]")
      ("exclude,e", po::value(&o.exclude)->default_value(""), "leave out these hosts/slots (same syntax)")
      ("num_nodes", po::value(&o.num_nodes)->default_value(-1), "use the first N hosts of the hostfile")
      ("num_gpus", po::value(&o.num_gpus)->default_value(-1), "ranks per node (slots 0..N-1)")
      ("num_accelerators", po::value(&o.num_accelerators)->default_value(-1), "same as --num_gpus")
      ("min_elastic_nodes", po::value(&o.min_elastic_nodes)->default_value(-1), "elastic training (not supported)")
      ("max_elastic_nodes", po::value(&o.max_elastic_nodes)->default_value(-1), "elastic training (not supported)")
      ("master_port", po::value(&o.master_port)->default_value(kDefaultMasterPort), "MASTER_PORT for the ranks")
      ("master_addr", po::value(&o.master_addr)->default_value(""), "MASTER_ADDR (default: node 0's address)")
      ("node_rank", po::value(&o.node_rank)->default_value(-1), "this node's index, with --no_ssh")
      ("launcher", po::value(&o.launcher)->default_value("pdsh"), "multi-node backend: pdsh, ssh, openmpi, mpich, impi, mvapich, slurm")
      ("launcher_args", po::value(&o.launcher_args)->default_value(""), "extra arguments for the backend command (shell-split)")
      ("module", po::bool_switch(&o.module), "run the program as a Python module (python -u -m)")
      ("no_python", po::bool_switch(&o.no_python), "run the program directly, without python")
      ("no_local_rank", po::bool_switch(&o.no_local_rank), "do not pass --local_rank=N to the program")
      ("no_ssh", po::bool_switch(&o.no_ssh), "run this node only (give --node_rank and --master_addr on every node)")
      ("no_ssh_check", po::bool_switch(&o.no_ssh_check), "skip the ssh reachability check")
      ("force_multi", po::bool_switch(&o.force_multi), "use the multi-node backend even for one host")
      ("save_pid", po::bool_switch(&o.save_pid), "write the agent's pid to /tmp/<runner pid>.deepspeed")
      ("enable_each_rank_log", po::value(&o.enable_each_rank_log)->default_value("None"), "directory for one log file per rank")
      ("autotuning", po::value(&o.autotuning)->default_value(""),
       "tune: find the fastest ZeRO stage and micro-batch for a dsx train job and write its ds_config; run: "
       "tune, then train with it (see dsx autotune)")
      ("elastic_training", po::bool_switch(&o.elastic_training), "elastic training (not supported)")
      ("bind_cores_to_rank", po::bool_switch(&o.bind_cores_to_rank), "pin each rank to its share of the cores")
      ("bind_core_list", po::value(&o.bind_core_list)->default_value(""), "cores to share out, e.g. 0-3,8-11")
      ("ssh_port", po::value(&o.ssh_port)->default_value(-1), "ssh port of every host")
      ("venv_script", po::value(&o.venv_script)->default_value(""), "script sourced on every node first (pdsh, ssh)")
      ("log_level", po::value(&o.log_level)->default_value("info"), "debug, info, warning, error or critical")
      ("quiet,q", po::bool_switch(&o.quiet), "same as --log_level error")
      ("dry_run", po::bool_switch(&o.dry_run), "dsx: print the command for every node (or rank) and exit")
      ("local_rank_rule", po::value(&o.local_rank_rule)->default_value("modulo"),
       "dsx: LOCAL_RANK = RANK mod ranks-on-node ('modulo', DeepSpeed) or position on node ('index', torchrun)")
      ("kill_grace_s", po::value(&o.kill_grace_s)->default_value(30), "dsx: seconds between SIGTERM and SIGKILL when stopping ranks")
      ("max_restarts", po::value(&o.max_restarts)->default_value(0),
       "torchrun's: when a rank fails, stop the job and start it again, up to N times (dsx train resumes from --save)");
  return d;
}

namespace {

// Flags of the per-node agent and the rank shim that users do not type.
po::options_description agent_options(std::string& world_info, std::string& tether, bool& shim, int& restart_count) {
  po::options_description d("internal");
  d.add_options()
      ("world_info", po::value(&world_info), "node agent: the world from the runner (base64 JSON)")
      ("dsx_tether", po::value(&tether), "node agent: 'stdin' or 'parent'")
      ("dsx_rank_shim", po::bool_switch(&shim), "rank wrapper under mpirun/srun")
      ("dsx_restart_count", po::value(&restart_count)->default_value(0), "node agent, rank shim: which restart this is")
      ("enable_elastic_training", po::bool_switch(), "elastic training (not supported)");
  return d;
}

}  // namespace

int find_program(int argc, char** argv, const po::options_description& options) {
  for (int i = 1; i < argc; ++i) {
    std::string word = argv[i];
    if (word == "--") return i + 1;
    if (word.size() < 2 || word[0] != '-') return i;
    if (word.find('=') != std::string::npos) continue;
    bool is_long = word.rfind("--", 0) == 0;
    std::string name = is_long ? word.substr(2) : word.substr(1, 1);
    if (!is_long && word.size() > 2) continue;  // -Hfile
    // Long flags may be abbreviated to a unique prefix (--num_gpu), as argparse allows.
    const po::option_description* opt = nullptr;
    try {
      opt = is_long ? options.find_nothrow(name, true) : options.find_nothrow(name, false, false, true);
    } catch (const po::ambiguous_option&) {
      ++i;  // taken as a flag with its value: the parse below names the candidates
      continue;
    }
    if (!is_long && !opt) {
      for (const auto& o : options.options())
        if (o->canonical_display_name(po::command_line_style::allow_dash_for_short) == word) opt = o.get();
    }
    if (opt && opt->semantic()->max_tokens() > 0) ++i;
  }
  return argc;
}

namespace {

// DeepSpeed's per-node launcher takes `--save_pid <runner pid>`, where the runner's --save_pid is a
// switch: in agent mode (--world_info) the pair is taken out of `words` and the pid returned.
std::string take_agent_save_pid(std::vector<std::string>& words) {
  bool agent = false;
  for (const auto& w : words) agent = agent || w.rfind("--world_info", 0) == 0;
  for (size_t i = 1; agent && i + 1 < words.size(); ++i) {
    if (words[i] == "--save_pid" && !words[i + 1].empty() && std::isdigit(static_cast<unsigned char>(words[i + 1][0]))) {
      std::string pid = words[i + 1];
      words.erase(words.begin() + static_cast<std::ptrdiff_t>(i), words.begin() + static_cast<std::ptrdiff_t>(i) + 2);
      return pid;
    }
  }
  return "";
}

// `--include=` (an empty value, as argparse takes it) becomes the flag and "": among the launcher's
// flags only (before `program_at`), never the program's arguments. Returns the new program_at.
int split_empty_values(std::vector<std::string>& words, int program_at) {
  for (int i = 1; i < program_at; ++i) {
    std::string& w = words[static_cast<size_t>(i)];
    if (w.size() > 3 && w.rfind("--", 0) == 0 && w.find('=') == w.size() - 1) {
      w.pop_back();
      words.insert(words.begin() + i + 1, std::string());
      ++i, ++program_at;
    }
  }
  return program_at;
}

// torchrun's flags, which `dsx launch` (the deepspeed launcher) does not take: say where they go.
void refuse_torchrun_flags(const std::vector<std::string>& words, int program_at) {
  for (int i = 1; i < program_at; ++i) {
    const std::string& w = words[static_cast<size_t>(i)];
    for (const char* flag : {"--nproc_per_node", "--nproc-per-node", "--nnodes", "--rdzv", "--standalone", "--max-restarts"}) {
      if (w.rfind(flag, 0) != 0) continue;
      throw Error(ErrorKind::Usage, "dsx launch: '" + w + "' is torchrun's flag; run `dsx torchrun` with the same "
                                    "command line (torchrun's flags and meaning, see docs/launch.md)");
    }
  }
}

std::vector<char*> pointers_to(std::vector<std::string>& words) {
  std::vector<char*> args;
  for (auto& w : words) args.push_back(w.data());
  return args;
}

// The launch's own words without `--autotuning MODE` / `--autotuning=MODE` (before the program
// only: the program's arguments are its own).
std::vector<std::string> without_autotuning_flag(const std::vector<std::string>& words, int program_at) {
  std::vector<std::string> rest;
  for (size_t i = 1; i < words.size(); ++i) {
    const bool flag = static_cast<int>(i) < program_at;
    if (flag && words[i] == "--autotuning") {
      ++i;
    } else if (!flag || words[i].rfind("--autotuning=", 0) != 0) {
      rest.push_back(words[i]);
    }
  }
  return rest;
}

// What a node agent (`--world_info`, started by the runner on each node) is told by its flags.
launcher::AgentOptions node_agent_options(const LaunchOptions& o, const launcher::ProgramSpec& program,
                                          const std::string& world_info, const std::string& tether) {
  launcher::AgentOptions a;
  a.world = launcher::decode_world_info(world_info);
  a.node_rank = o.node_rank < 0 ? 0 : o.node_rank;
  a.master_addr = o.master_addr.empty() ? "127.0.0.1" : o.master_addr;
  a.master_port = o.master_port;
  a.program = program;
  a.each_rank_log = o.enable_each_rank_log;
  a.bind_cores_to_rank = o.bind_cores_to_rank || !o.bind_core_list.empty();
  a.bind_core_list = o.bind_core_list;
  a.local_rank_rule = launcher::parse_local_rank_rule(o.local_rank_rule);
  a.kill_grace_s = o.kill_grace_s;
  a.max_restarts = o.max_restarts;
  a.tethered = !tether.empty();
  a.tether_stdin = tether == "stdin";
  a.quiet = o.log_level == "critical";
  a.base_env = launcher::current_environment();
  return a;
}

}  // namespace

int run_launch(int argc, char** argv) {
  LaunchOptions o;
  std::string world_info, tether;
  bool shim = false;
  int restart_count = 0;
  po::options_description all = launch_options(o);
  po::options_description internal = agent_options(world_info, tether, shim, restart_count);

  std::vector<std::string> words(argv, argv + argc);
  const std::string save_pid_value = take_agent_save_pid(words);
  po::options_description parse_set;
  parse_set.add(all).add(internal);
  std::vector<char*> args = pointers_to(words);
  int program_at = find_program(static_cast<int>(args.size()), args.data(), parse_set);
  program_at = split_empty_values(words, program_at);
  refuse_torchrun_flags(words, program_at);
  args = pointers_to(words);
  bool wants_help = false;
  for (int i = 1; i < program_at; ++i) wants_help = wants_help || !std::strcmp(args[i], "--help") || !std::strcmp(args[i], "-h");
  auto parsed = parse_args(program_at, args.data(),
                           "dsx launch [flags] PROGRAM [ARGS...]\n\n"
                           "Starts PROGRAM once per slot (GPU, or process on a CPU host) on this machine or on every\n"
                           "host of the hostfile, with the DeepSpeed and torchrun environment, and stops every rank\n"
                           "when one fails. A Python script runs as 'python -u script'; see docs/launch.md.",
                           wants_help ? all : parse_set);
  if (parsed.help) return 0;

  o.launcher_given = !parsed.vars["launcher"].defaulted();
  const bool num_gpus_given = !parsed.vars["num_gpus"].defaulted();
  if (!num_gpus_given) o.num_gpus = o.num_accelerators;  // DeepSpeed's other name for --num_gpus
  o.num_gpus_given = num_gpus_given || !parsed.vars["num_accelerators"].defaulted();
  if (o.quiet) o.log_level = "error";
  for (int i = program_at; i < static_cast<int>(args.size()); ++i) {
    if (i == program_at) {
      o.user_script = args[i];
    } else {
      o.user_args.push_back(args[i]);
    }
  }
  launcher::ProgramSpec program{o.user_script, o.user_args, o.module, o.no_python, o.no_local_rank};
  if (shim) return launcher::run_rank_shim(program, o.kill_grace_s, restart_count, o.max_restarts);
  if (world_info.empty() && !o.autotuning.empty()) {
    // DeepSpeed's `--autotuning tune|run`: the same command, tuned first (dsx autotune).
    return run_autotune_from_launch(o.autotuning, without_autotuning_flag(words, program_at));
  }
  if (world_info.empty()) return launcher::run_launch(o);

  // Node agent mode.
  if (o.user_script.empty()) throw Error(ErrorKind::Usage, "dsx launch --world_info: no program to run");
  if (parsed.vars["enable_elastic_training"].as<bool>()) {
    throw Error(ErrorKind::Unsupported, "elastic training is not supported by dsx launch");
  }
  launcher::AgentOptions a = node_agent_options(o, program, world_info, tether);
  a.save_pid = save_pid_value;
  a.restart_count = restart_count;
  return launcher::run_agent(a, o.dry_run);
}

}  // namespace dsx::tools
