// `dsx torchrun`: a drop-in for `torchrun` (python -m torch.distributed.run). Its flags with
// torchrun's spellings (dashed or underscored), defaults and PET_* fallbacks; under srun the
// SLURM_* variables fill what the command line leaves out. A command of its own rather than
// more flags on `dsx launch`: the two launchers give the same names different meanings
// (--node_rank, --master_addr, the program's --local_rank argument, LOCAL_RANK, the hostfile), so
// one command line means one launcher. launcher/torchrun_agent.cpp does the work.
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <random>
#include <sstream>
#include <tuple>
#include <thread>

#include "dsx/error.h"
#include "launcher/local_devices.h"
#include "launcher/torchrun_options.h"
#include "tools/cli.h"
#include "tools/launch_args.h"

namespace dsx::tools {
namespace {

using launcher::TorchrunOptions;

// The command line as given, before it is resolved into TorchrunOptions.
struct TorchrunFlags {
  std::string nnodes = "1:1", nproc_per_node = "1", rdzv_backend = "static", rdzv_endpoint, rdzv_id = "none",
              rdzv_conf, role = "default", log_dir, redirects = "0", tee = "0", local_ranks_filter,
              master_addr = "127.0.0.1", local_addr, start_method = "spawn", ignored;
  int max_restarts = 0, node_rank = 0, master_port = -1;
  double monitor_interval = 0.1;
  bool standalone = false, module = false, no_python = false, run_path = false;
};

po::options_description torchrun_flags(TorchrunFlags& f) {
  po::options_description d("dsx torchrun (torchrun's flags; dashed spellings work too)");
  d.add_options()
      ("nnodes", po::value(&f.nnodes)->default_value(f.nnodes), "number of nodes, N or MIN:MAX (elastic: c10d only)")
      ("nproc_per_node", po::value(&f.nproc_per_node)->default_value(f.nproc_per_node), "ranks per node: N, gpu, cpu or auto")
      ("rdzv_backend", po::value(&f.rdzv_backend)->default_value(f.rdzv_backend), "static or c10d")
      ("rdzv_endpoint", po::value(&f.rdzv_endpoint)->default_value(""), "HOST[:PORT] of the rendezvous (c10d: port 29400)")
      ("rdzv_id", po::value(&f.rdzv_id)->default_value(f.rdzv_id), "the job's id, the same on every node")
      ("rdzv_conf", po::value(&f.rdzv_conf)->default_value(""), "K=V,...: join_timeout and last_call_timeout (s) are used, others accepted")
      ("standalone", po::bool_switch(&f.standalone), "one node: a rendezvous of its own on a free port")
      ("max_restarts", po::value(&f.max_restarts)->default_value(0), "restarts of every node's ranks after a failure")
      ("monitor_interval", po::value(&f.monitor_interval)->default_value(0.1), "accepted; dsx hears of a rank's end at once")
      ("start_method", po::value(&f.start_method)->default_value(f.start_method), "accepted (spawn, fork, forkserver)")
      ("role", po::value(&f.role)->default_value(f.role), "ROLE_NAME of the ranks")
      ("module,m", po::bool_switch(&f.module), "run the program as a Python module (python -u -m)")
      ("no_python", po::bool_switch(&f.no_python), "run the program itself, not through python")
      ("run_path", po::bool_switch(&f.run_path), "run the script by its path (python -u script, as without it)")
      ("log_dir", po::value(&f.log_dir)->default_value(""), "directory for per-rank files: <id>_XXXXXX/attempt_N/<local rank>/")
      ("redirects,r", po::value(&f.redirects)->default_value("0"), "to files instead of the console: 0 none, 1 stdout, 2 stderr, 3 both; or 0:3,1:1")
      ("tee,t", po::value(&f.tee)->default_value("0"), "to files and the console: same values as --redirects")
      ("local_ranks_filter", po::value(&f.local_ranks_filter)->default_value(""), "local ranks whose output is shown, e.g. 0,1")
      ("node_rank", po::value(&f.node_rank)->default_value(0), "this node's rank (static backend)")
      ("master_addr", po::value(&f.master_addr)->default_value(f.master_addr), "node 0's address (static backend)")
      ("master_port", po::value(&f.master_port), "node 0's port for the rendezvous (static backend; 29500)")
      ("local_addr", po::value(&f.local_addr)->default_value(""), "the address this node gives the others")
      ("event_log_handler", po::value(&f.ignored), "accepted")
      ("logs_specs", po::value(&f.ignored), "accepted")
      ("log_line_prefix_template", po::value(&f.ignored), "accepted")
      ("numa_binding", po::value(&f.ignored), "accepted")
      ("signals_to_handle", po::value(&f.ignored), "accepted");
  return d;
}

// --nproc-per-node -> --nproc_per_node, among the flags before the program only.
void underscore_flag_names(std::vector<std::string>& words, int program_at) {
  for (int i = 1; i < program_at; ++i) {
    std::string& w = words[static_cast<size_t>(i)];
    if (w.rfind("--", 0) != 0) continue;
    const size_t end = std::min(w.find('='), w.size());
    std::replace(w.begin() + 2, w.begin() + static_cast<std::ptrdiff_t>(end), '-', '_');
  }
}

bool flag_given(const std::vector<std::string>& words, int program_at, const std::string& name) {
  for (int i = 1; i < program_at; ++i) {
    const std::string& w = words[static_cast<size_t>(i)];
    if (w == "--" + name || w.rfind("--" + name + "=", 0) == 0) return true;
  }
  return false;
}

// torchrun's PET_<NAME> fallbacks: a flag not on the command line comes from the environment
// (a switch when PET_<NAME> is 1). Inserted before the program as if typed.
int add_environment_flags(std::vector<std::string>& words, int program_at, const po::options_description& d) {
  for (const auto& option : d.options()) {
    const std::string name = option->long_name();
    std::string env = "PET_" + name;
    std::transform(env.begin(), env.end(), env.begin(), [](unsigned char c) { return std::toupper(c); });
    const char* value = std::getenv(env.c_str());
    if (!value || name == "logs_specs" || name == "numa_binding") continue;
    if (flag_given(words, program_at, name)) continue;
    const bool is_switch = option->semantic()->max_tokens() == 0;
    if (is_switch && std::string(value) != "1") continue;
    words.insert(words.begin() + program_at++, is_switch ? "--" + name : "--" + name + "=" + value);
  }
  return program_at;
}

}  // namespace

namespace {

int to_int(const std::string& text, const std::string& flag) {
  try {
    size_t used = 0;
    const int v = std::stoi(text, &used);
    if (used == text.size()) return v;
  } catch (const std::exception&) {
  }
  throw Error(ErrorKind::Usage, "dsx torchrun " + flag + " '" + text + "': not a whole number");
}

// torchrun's --nproc_per_node: a count, or gpu / cpu / auto counted on this machine.
int ranks_per_node(const std::string& text) {
  if (text != "gpu" && text != "cpu" && text != "auto") {
    if (!text.empty() && std::isdigit(static_cast<unsigned char>(text[0]))) return to_int(text, "--nproc_per_node");
    throw Error(ErrorKind::Usage, "dsx torchrun --nproc_per_node '" + text + "': give a count, gpu, cpu or auto");
  }
  const launcher::LocalDevices devices = launcher::detect_local_devices();
  const int cpus = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  if (text == "gpu" && !devices.gpus) throw Error(ErrorKind::Usage, "dsx torchrun --nproc_per_node gpu: no GPU on this machine (torchrun: 'Cuda is not available.')");
  if (text == "cpu") return cpus;
  return devices.gpus ? devices.count : cpus;
}

// --nnodes N or MIN:MAX, as {MIN, MAX}.
std::pair<int, int> node_count(const std::string& text) {
  const auto colon = text.find(':');
  const int min = to_int(text.substr(0, colon), "--nnodes");
  const int max = colon == std::string::npos ? min : to_int(text.substr(colon + 1), "--nnodes");
  if (text.find(':', colon == std::string::npos ? colon : colon + 1) != std::string::npos)
    throw Error(ErrorKind::Usage, "dsx torchrun --nnodes '" + text + "' is not in \"MIN:MAX\" format");
  if (!(0 < min && min <= max)) throw Error(ErrorKind::Usage, "dsx torchrun --nnodes " + text + ": min_nodes must be > 0 and <= max_nodes");
  return {min, max};
}

// "3" for every local rank, or "0:3,1:1" per local rank (torchrun's --redirects/--tee).
std::vector<int> stream_choice(const std::string& text, int nproc, const std::string& flag) {
  std::vector<int> per_rank(static_cast<size_t>(nproc), 0);
  if (text.find(':') == std::string::npos) {
    const int all = to_int(text, flag);
    if (all < 0 || all > 3) throw Error(ErrorKind::Usage, "dsx torchrun " + flag + " " + text + ": give 0, 1, 2 or 3");
    std::fill(per_rank.begin(), per_rank.end(), all);
    return per_rank;
  }
  std::istringstream in(text);
  for (std::string item; std::getline(in, item, ',');) {
    const auto colon = item.find(':');
    const int rank = to_int(item.substr(0, colon), flag), value = to_int(item.substr(colon + 1), flag);
    if (rank < 0 || rank >= nproc || value < 0 || value > 3)
      throw Error(ErrorKind::Usage, "dsx torchrun " + flag + " '" + item + "': LOCAL_RANK:0..3 with LOCAL_RANK < " + std::to_string(nproc));
    per_rank[static_cast<size_t>(rank)] = value;
  }
  return per_rank;
}

std::string random_run_id() {
  std::random_device device;
  std::mt19937_64 bits(device());
  char text[40];
  std::snprintf(text, sizeof text, "%08llx-%04llx-4%03llx-a%03llx-%012llx", bits() & 0xffffffffULL, bits() & 0xffffULL,
                bits() & 0xfffULL, bits() & 0xfffULL, bits() & 0xffffffffffffULL);
  return text;
}

// The first host of a Slurm node list ("node[03-05,9],gpu1" -> node03).
std::string first_slurm_host(const std::string& list) {
  const auto bracket = list.find('['), comma = list.find(',');
  if (bracket == std::string::npos || (comma != std::string::npos && comma < bracket)) return list.substr(0, comma);
  const std::string inside = list.substr(bracket + 1);
  return list.substr(0, bracket) + inside.substr(0, inside.find_first_of("-,]"));
}

}  // namespace

namespace {

// dsx addition: inside an srun step (one task per node), what the usual sbatch script passes by
// hand: --nnodes $SLURM_NNODES, --node_rank $SLURM_NODEID, --rdzv_id $SLURM_JOB_ID and the first
// node of $SLURM_JOB_NODELIST as --master_addr. Flags and PET_* variables win.
int add_slurm_flags(std::vector<std::string>& words, int program_at) {
  const auto env = [](const char* name) { const char* v = std::getenv(name); return std::string(v ? v : ""); };
  if (env("SLURM_PROCID").empty() || env("SLURM_NNODES").empty() || env("SLURM_NODEID").empty()) return program_at;
  const std::vector<std::pair<std::string, std::string>> from_slurm = {
      {"nnodes", env("SLURM_NNODES")}, {"node_rank", env("SLURM_NODEID")}, {"rdzv_id", env("SLURM_JOB_ID")},
      {"master_addr", first_slurm_host(env("SLURM_JOB_NODELIST").empty() ? env("SLURM_NODELIST") : env("SLURM_JOB_NODELIST"))}};
  for (const auto& [name, value] : from_slurm) {
    if (value.empty() || flag_given(words, program_at, name)) continue;
    words.insert(words.begin() + program_at++, "--" + name + "=" + value);
  }
  return program_at;
}

// HOST[:PORT] into the options' rendezvous address.
void set_endpoint(TorchrunOptions& t, const std::string& endpoint, int default_port) {
  const auto colon = endpoint.rfind(':');
  t.rdzv_host = endpoint.substr(0, colon);
  t.rdzv_port = colon == std::string::npos ? default_port : to_int(endpoint.substr(colon + 1), "--rdzv_endpoint");
  if (t.rdzv_host == "localhost") t.rdzv_host = "127.0.0.1";
}

// Where the nodes meet: torchrun's choice between static, c10d and --standalone.
void resolve_rendezvous(TorchrunOptions& t, const TorchrunFlags& f, bool master_port_given) {
  std::string backend = f.rdzv_backend, endpoint = f.rdzv_endpoint;
  t.run_id = f.rdzv_id;
  // --standalone, and (torch 2.x) a one-node static launch with no port given: a free port.
  if (f.standalone || (backend == "static" && endpoint.empty() && !master_port_given && t.nnodes == 1)) {
    backend = "c10d", endpoint = "localhost:0", t.run_id = random_run_id();
  }
  if (backend == "static") {
    const int port = master_port_given ? f.master_port : 29500;
    set_endpoint(t, endpoint.empty() ? f.master_addr + ":" + std::to_string(port) : endpoint, port);
    t.static_backend = true;
    if (t.min_nodes < t.nnodes)
      throw Error(ErrorKind::Usage,
                  "dsx torchrun --nnodes " + f.nnodes +
                      ": a node range needs the c10d rendezvous, where nodes come and go without "
                      "fixed ranks; add --rdzv_backend c10d --rdzv_endpoint HOST:PORT");
    t.node_rank = f.node_rank;
    if (t.node_rank < 0 || t.node_rank >= t.nnodes)
      throw Error(ErrorKind::Usage, "dsx torchrun --node_rank " + std::to_string(t.node_rank) + ": give 0.." + std::to_string(t.nnodes - 1));
  } else if (backend == "c10d") {
    if (endpoint.empty()) throw Error(ErrorKind::Usage, "dsx torchrun --rdzv_backend c10d needs --rdzv_endpoint HOST[:PORT]");
    set_endpoint(t, endpoint, 29400);
    t.static_backend = false;
  } else {
    throw Error(ErrorKind::Unsupported, "dsx torchrun --rdzv_backend " + backend + ": use c10d or static (dsx serves "
                                        "the rendezvous itself; etcd is not supported)");
  }
  std::istringstream conf(f.rdzv_conf);
  for (std::string item; std::getline(conf, item, ',');) {
    const auto eq = item.find('=');
    if (eq == std::string::npos || eq + 1 == item.size())
      throw Error(ErrorKind::Usage, "dsx torchrun --rdzv_conf '" + item + "': give KEY=VALUE");
    const std::string key = item.substr(0, eq);
    if (key == "join_timeout" || (key == "timeout" && t.static_backend))
      t.join_timeout = std::chrono::seconds(to_int(item.substr(eq + 1), "--rdzv_conf " + key));
    if (key == "last_call_timeout")
      t.last_call_timeout = std::chrono::seconds(to_int(item.substr(eq + 1), "--rdzv_conf " + key));
  }
}

TorchrunOptions resolve(const TorchrunFlags& f, bool master_port_given, const std::vector<std::string>& program) {
  TorchrunOptions t;
  std::tie(t.min_nodes, t.nnodes) = node_count(f.nnodes);
  t.nproc_per_node = ranks_per_node(f.nproc_per_node);
  resolve_rendezvous(t, f, master_port_given);
  if (f.max_restarts < 0) throw Error(ErrorKind::Usage, "dsx torchrun --max_restarts must be >= 0");
  if (f.no_python && f.module)
    throw Error(ErrorKind::Usage, "dsx torchrun: don't use both the '--no-python' flag and the '--module' flag at the same time");
  if (program.empty()) throw Error(ErrorKind::Usage, "dsx torchrun: no training script: dsx torchrun [flags] SCRIPT [ARGS...]");
  t.tee = stream_choice(f.tee, t.nproc_per_node, "--tee");
  t.max_restarts = f.max_restarts;
  t.role = f.role;
  t.local_addr = f.local_addr;
  t.log_dir = f.log_dir;
  t.redirects = stream_choice(f.redirects, t.nproc_per_node, "--redirects");
  const auto any = [](const std::vector<int>& v) { return std::any_of(v.begin(), v.end(), [](int x) { return x; }); };
  if (t.log_dir.empty() && (any(t.redirects) || any(t.tee)))
    throw Error(ErrorKind::Usage, "dsx torchrun --redirects/--tee write files under --log_dir: give --log_dir DIR "
                                  "(dsx makes no temporary directory for them)");
  std::istringstream shown(f.local_ranks_filter);
  for (std::string r; std::getline(shown, r, ',');) t.local_ranks_filter.push_back(to_int(r, "--local_ranks_filter"));
  const char* grace = std::getenv("TORCH_ELASTIC_SHUTDOWN_TIMEOUT");
  t.kill_grace_s = grace && *grace ? to_int(grace, "TORCH_ELASTIC_SHUTDOWN_TIMEOUT") : 30;
  const char* python = std::getenv("PYTHON_EXEC");
  t.python = python && *python ? python : launcher::find_python();
  t.program = {program[0], {program.begin() + 1, program.end()}, f.module, f.no_python, /*no_local_rank=*/true};
  return t;
}

}  // namespace

int run_torchrun(int argc, char** argv) {
  TorchrunFlags f;
  const po::options_description d = torchrun_flags(f);
  std::vector<std::string> words(argv, argv + argc), probe = words;
  underscore_flag_names(probe, argc);
  std::vector<char*> pointers;
  for (auto& w : probe) pointers.push_back(w.data());
  int program_at = find_program(argc, pointers.data(), d);
  underscore_flag_names(words, program_at);
  program_at = add_environment_flags(words, program_at, d);
  program_at = add_slurm_flags(words, program_at);
  pointers.clear();
  for (auto& w : words) pointers.push_back(w.data());
  auto parsed = parse_args(program_at, pointers.data(),
                           "dsx torchrun [flags] SCRIPT [ARGS...]\n\n"
                           "torchrun's command line: starts --nproc_per_node ranks on this node with torchrun's\n"
                           "environment, meets the other nodes' `dsx torchrun` at the rendezvous, and restarts every\n"
                           "node's ranks after a failure (--max_restarts). See docs/launch.md.",
                           d);
  if (parsed.help) return 0;
  const std::vector<std::string> program(words.begin() + program_at, words.end());
  return launcher::run_torchrun(resolve(f, parsed.vars.count("master_port") > 0, program));
}

}  // namespace dsx::tools
