// The runner: DeepSpeed's order of operations, dsx's pre-launch checks, then one of the
// backends, all supervised so that no rank is left behind.
#include "launcher/launch.h"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstring>
#include <filesystem>
#include <iostream>

#include "dsx/error.h"
#include "dsx/shell_quote.h"
#include "launcher/backend_command.h"
#include "launcher/env_export.h"
#include "launcher/gpu_oversubscription.h"
#include "launcher/hostfile.h"
#include "launcher/launch_plan.h"
#include "launcher/local_devices.h"
#include "launcher/preflight.h"
#include "launcher/process.h"
#include "launcher/restart_loop.h"
#include "launcher/rank_shim.h"
#include "launcher/shell_words.h"

namespace dsx::launcher {
namespace {

// `bytes` random bytes from the kernel, as hex.
std::string random_hex(size_t bytes) {
  std::ifstream urandom("/dev/urandom", std::ios::binary);
  std::string raw(bytes, '\0');
  if (!urandom.read(raw.data(), static_cast<std::streamsize>(bytes))) {
    throw Error(ErrorKind::Io, "cannot read /dev/urandom for the job's store secret");
  }
  static const char* digits = "0123456789abcdef";
  std::string hex;
  for (unsigned char c : raw) {
    hex += digits[c >> 4];
    hex += digits[c & 15];
  }
  return hex;
}

bool verbose(const LaunchOptions& o) { return !o.quiet && (o.log_level == "info" || o.log_level == "debug"); }

void info(const LaunchOptions& o, const std::string& text) {
  if (verbose(o)) std::cerr << "dsx launch: " << text << std::endl;
}

// Shown at log levels debug, info and warning, as DeepSpeed's logger.warning is.
void warn(const LaunchOptions& o, const std::string& text) {
  if (!o.quiet && o.log_level != "error" && o.log_level != "critical") std::cerr << "dsx launch: " << text << std::endl;
}

std::string self_path() {
  char buf[PATH_MAX];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) throw Error(ErrorKind::Launch, "cannot find the dsx binary (/proc/self/exe)");
  return std::string(buf, n);
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

// The backend a multi-node launch uses: --launcher, except that a default pdsh that is not
// installed falls back to dsx's own ssh fan-out.
std::string choose_backend(const LaunchOptions& o) {
  std::string backend = lower(o.launcher);
  if (backend == "pdsh" && !o.launcher_given && !have_program("pdsh")) {
    info(o, "pdsh is not installed; using dsx's built-in ssh fan-out (--launcher ssh)");
    return "ssh";
  }
  return backend;
}

std::vector<std::string> probe_ssh_options(const LaunchOptions& o, const std::string& backend) {
  if (backend == "ssh") return ssh_options(o.ssh_port, shell_split(o.launcher_args));
  return ssh_options(o.ssh_port, shell_split(env_value(current_environment(), "PDSH_SSH_ARGS_APPEND")));
}

int run_local(const LaunchOptions& o, const LaunchPlan& plan) {
  AgentOptions a;
  a.world = plan.world;
  a.node_rank = plan.node_rank;
  a.master_addr = plan.master_addr;
  a.master_port = o.master_port;
  a.program = {o.user_script, o.user_args, o.module, o.no_python, o.no_local_rank};
  a.each_rank_log = o.enable_each_rank_log;
  a.bind_cores_to_rank = o.bind_cores_to_rank || !o.bind_core_list.empty();
  a.bind_core_list = o.bind_core_list;
  if (o.save_pid) a.save_pid = std::to_string(::getpid());
  a.local_rank_rule = parse_local_rank_rule(o.local_rank_rule);
  a.kill_grace_s = o.kill_grace_s;
  a.max_restarts = o.max_restarts;
  a.quiet = o.log_level == "critical";
  a.base_env = current_environment();
  if (plan.drop_visible_devices) env_set(a.base_env, "CUDA_VISIBLE_DEVICES", nullptr);
  return run_agent(a, o.dry_run);
}

// pdsh, mpirun or srun's command for `job`, with the ssh options pdsh passes on.
BackendCommand backend_command(const RemoteJob& job, const std::vector<EnvVar>& env) {
  const LaunchOptions& o = job.options;
  if (o.launcher == "slurm") return slurm_command(job);
  if (o.launcher != "pdsh") return mpi_command(job);
  BackendCommand command = pdsh_command(job);
  std::string append = env_value(env, "PDSH_SSH_ARGS_APPEND");
  if (o.ssh_port > 0) {
    if (!append.empty()) append += ' ';
    append += "-p " + std::to_string(o.ssh_port);
  }
  for (const auto& [k, v] : command.env) {
    if (k != kStoreSecretOverSsh) continue;  // the secret travels in ssh's environment
    if (!append.empty()) append += ' ';
    append += std::string("-o SendEnv=") + kStoreSecretOverSsh;
  }
  if (!append.empty()) command.env.emplace_back("PDSH_SSH_ARGS_APPEND", append);
  return command;
}

// The members of one start of a multi-node job: one per node for dsx's ssh fan-out, else the one
// backend command (pdsh, mpirun, srun). With `dry_run` they are printed instead.
std::vector<Member> remote_members(const RemoteJob& job, const std::vector<EnvVar>& env, bool dry_run) {
  const std::string& backend = job.options.launcher;
  std::vector<Member> members;
  if (backend == "ssh") {
    auto commands = ssh_commands(job);
    for (size_t n = 0; n < commands.size(); ++n) {
      if (dry_run) {
        std::cout << "node " << n << " (" << commands[n].node << "): " << display_command(commands[n]) << "\n";
        continue;
      }
      Member m;
      m.name = "node " + std::to_string(n) + " (" + commands[n].node + ")";
      m.prefix = commands[n].node + ": ";
      m.spawn.argv = commands[n].argv;
      m.spawn.env = env;
      m.spawn.stdin_pipe = true;
      m.spawn.stdin_text = commands[n].stdin_text;
      m.stop_by_closing_stdin = true;
      m.watch_failure_marker = true;
      members.push_back(std::move(m));
    }
    return members;
  }
  BackendCommand command = backend_command(job, env);
  if (dry_run) {
    std::cout << backend << ": " << display_command(command) << "\n";
    if (backend == "pdsh") {
      for (size_t n = 0; n < job.world.size(); ++n) {
        std::cout << "node " << n << " (" << job.world[n].host << "): "
                  << remote_shell_command(job, std::to_string(n), "parent") << "\n";
      }
    }
    return members;
  }
  Member m;
  m.name = backend;
  m.spawn.argv = command.argv;
  m.spawn.env = env;
  for (const auto& [k, v] : command.env) env_set(m.spawn.env, k, &v);
  m.watch_failure_marker = true;  // the first failing rank's code, not the backend's summary
  members.push_back(std::move(m));
  return members;
}

int run_multi_node(const LaunchOptions& o, const LaunchPlan& plan, const std::string& backend) {
  RemoteJob job;
  job.world = plan.world;
  job.master_addr = plan.master_addr;
  job.cwd = std::filesystem::current_path().string();
  auto env = current_environment();
  job.exports = collect_exports(env, job.cwd, env_value(env, "HOME"));
  job.dsx_path = self_path();
  job.hostfile = o.hostfile;
  job.runner_pid = static_cast<int>(::getpid());
  job.options = o;
  job.options.launcher = backend;
  if (o.dry_run) {
    remote_members(job, env, true);
    return 0;
  }
  SupervisorOptions s;
  s.kill_grace_s = o.kill_grace_s + 5;  // remote agents get their own grace first
  s.quiet = o.log_level == "critical";
  // Every node is started again on a restart, so that all ranks begin the same attempt.
  return run_with_restarts(o.max_restarts, s.quiet, [&](int restart) {
    job.options.restart_count = restart;
    return supervise(remote_members(job, env, false), s);
  });
}

}  // namespace

int run_launch(const LaunchOptions& options) {
  LaunchOptions o = options;
  if (o.elastic_training || o.min_elastic_nodes >= 0 || o.max_elastic_nodes >= 0) {
    throw Error(ErrorKind::Unsupported, "elastic training (--elastic_training, --min/max_elastic_nodes) is not supported "
                                        "by dsx launch; launch a fixed world instead");
  }
  if (!o.autotuning.empty()) {
    throw Error(ErrorKind::Internal, "--autotuning reached the launcher; `dsx launch` hands it to dsx autotune");
  }
  if (o.user_script.empty()) throw Error(ErrorKind::Usage, "no program to launch: dsx launch [flags] PROGRAM [ARGS...]");
  static const char* levels[] = {"debug", "info", "warning", "error", "critical"};
  if (std::find(std::begin(levels), std::end(levels), o.log_level) == std::end(levels)) {
    throw Error(ErrorKind::Usage, "--log_level '" + o.log_level + "': choose debug, info, warning, error or critical");
  }
  parse_local_rank_rule(o.local_rank_rule);  // reject a bad value before anything starts
  if (o.max_restarts < 0) throw Error(ErrorKind::Usage, "--max_restarts " + std::to_string(o.max_restarts) + ": give 0 or more restarts");

  auto hostfile = read_hostfile(o.hostfile);
  if (!hostfile) info(o, "Unable to find hostfile, will proceed with training with local resources only");
  auto devices = detect_local_devices();
  LocalMachine machine{devices.count, devices.gpus, env_value(current_environment(), "CUDA_VISIBLE_DEVICES")};
  LaunchPlan plan = plan_launch(o, hostfile, machine);
  for (const auto& note : plan.notes) info(o, note);
  if (auto warning = gpu_oversubscription_warning(plan, machine)) warn(o, *warning);

  std::string backend = plan.multi_node ? choose_backend(o) : "local";
  if (plan.multi_node && !o.dry_run) {
    check_backend_installed(backend);
    if (backend != "slurm") check_hosts_resolve(plan.world);  // Slurm node names need not be DNS names
    if ((backend == "ssh" || backend == "pdsh") && !o.no_ssh_check) {
      check_ssh_reachable(plan.world, probe_ssh_options(o, backend), o.ssh_port, o.hostfile);
    }
  }
  if (plan.master_addr.empty()) {
    const std::string& first = plan.world.front().host;
    // Other nodes must reach node 0 at an address node 0 has: ask it over ssh unless it is this
    // machine by a loopback name (or Slurm, whose nodes need not take ssh, or a dry run).
    const bool ask = plan.multi_node && !o.dry_run && backend != "slurm" && !is_loopback_host(first);
    plan.master_addr = ask ? ask_master_addr(first, probe_ssh_options(o, backend)) : resolve_master_addr(first);
  }
  if (o.master_port == 0) {
    // dsx: pick a free port. Only this machine can be asked, so only for a local launch.
    if (plan.multi_node) throw Error(ErrorKind::Usage, "--master_port 0 (pick a free port) works for one node only; give a port");
    o.master_port = pick_free_port(plan.master_addr);
    info(o, "--master_port 0: using free port " + std::to_string(o.master_port));
  }
  info(o, "world " + describe(plan.world) + ", master " + plan.master_addr + ":" + std::to_string(o.master_port) +
              (plan.multi_node ? ", runner " + backend : ", local"));
  if (!o.dry_run) check_master_port_free(plan.master_addr, o.master_port);
  // One secret per job, so that only this job's ranks can join its rendezvous store (DSX_
  // variables reach every node). A secret the user set is kept.
  if (!o.dry_run && !std::getenv("DSX_STORE_SECRET")) ::setenv("DSX_STORE_SECRET", random_hex(16).c_str(), 1);
  return plan.multi_node ? run_multi_node(o, plan, backend) : run_local(o, plan);
}

PlannedWorld planned_world(const LaunchOptions& o) {
  auto devices = detect_local_devices();
  LocalMachine machine{devices.count, devices.gpus, env_value(current_environment(), "CUDA_VISIBLE_DEVICES")};
  const LaunchPlan plan = plan_launch(o, read_hostfile(o.hostfile), machine);
  return {world_size(plan.world), static_cast<int>(plan.world.size()), plan.multi_node};
}

int run_agent(const AgentOptions& a, bool dry_run) {
  if (!dry_run) return run_node_agent(a);
  for (const auto& m : rank_members(a, find_python(), "<start time>")) {
    std::cout << m.name << ":";
    for (const auto& [k, v] : m.spawn.env) {
      if (k == "RANK" || k == "LOCAL_RANK" || k == "WORLD_SIZE" || k == "MASTER_ADDR" || k == "MASTER_PORT" ||
          k == "CUDA_VISIBLE_DEVICES" || k == "OMP_NUM_THREADS")
        std::cout << " " << k << "=" << shell_quote(v);
    }
    std::cout << " " << shell_join(m.spawn.argv);
    if (!m.spawn.log_path.empty()) std::cout << " > " << shell_quote(m.spawn.log_path) << " 2>&1";
    std::cout << "\n";
  }
  return 0;
}

namespace {

// The rank's own children that outlived it (a rank killed with kill -9 leaves them to us, its
// subreaper, not to its process group, which the scheduler's task shares): killed and reaped, so
// that nothing of the rank runs into the next attempt.
void stop_orphans() {
  for (pid_t pid : descendants(::getpid())) ::kill(pid, SIGKILL);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (std::chrono::steady_clock::now() < deadline) {
    const pid_t reaped = ::waitpid(-1, nullptr, WNOHANG);
    if (reaped < 0) break;  // none left
    if (reaped == 0) ::usleep(10000);
  }
}

}  // namespace

int run_rank_shim(const ProgramSpec& program, int kill_grace_s, int restart_count, int max_restarts) {
  ::prctl(PR_SET_CHILD_SUBREAPER, 1);
  auto env = current_environment();
  for (const auto& [k, v] : scheduler_rank_env(env)) env_set(env, k, &v);
  const std::string restarts = std::to_string(restart_count), most = std::to_string(max_restarts);
  env_set(env, "TORCHELASTIC_RESTART_COUNT", &restarts);
  env_set(env, "TORCHELASTIC_MAX_RESTARTS", &most);
  std::string rank = env_value(env, "RANK");
  Member m;
  m.name = "rank " + rank;
  m.prefix = "[rank" + rank + "]: ";
  m.spawn.argv = rank_argv(program, std::stoi(env_value(env, "LOCAL_RANK")), find_python());
  m.spawn.env = env;
  m.spawn.own_process_group = false;  // stay in the task's group, which the scheduler tracks
  m.is_rank = true;
  SupervisorOptions s;
  s.kill_grace_s = kill_grace_s;
  s.stopped_rank_timeout_s = stopped_rank_timeout_from(env);  // the watchdogs, as a node agent's
  s.hung_step_timeout_s = s.stopped_rank_timeout_s;
  s.quiet = true;  // the runner reports the failure, from the marker below
  Outcome outcome = supervise({m}, s);
  stop_orphans();
  if (outcome.exit_code != 0) {
    std::cerr << kAgentFailureMarker << outcome.exit_code << " rank=" << rank << " (" << outcome.reason << ")" << std::endl;
  }
  return outcome.exit_code;
}

}  // namespace dsx::launcher
