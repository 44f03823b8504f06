// Command builders for the multi-node backends (ref/launcher.md 4.5, with dsx's fixes: the
// remote side is a tethered dsx agent; filters are honoured by every backend; no hard-coded NIC).
#include "launcher/backend_command.h"

#include <algorithm>

#include "dsx/error.h"
#include "dsx/shell_quote.h"
#include "dsx/join.h"
#include "launcher/shell_words.h"
#include "launcher/world_info.h"

namespace dsx::launcher {
namespace {

std::string host_list(const World& world) {
  return join(world, ",", [](const auto& h) { return h.host; });
}

void append(std::vector<std::string>& to, const std::vector<std::string>& more) {
  to.insert(to.end(), more.begin(), more.end());
}

std::vector<std::string> program_flags(const RemoteJob& job) {
  std::vector<std::string> flags;
  if (job.options.no_python) flags.push_back("--no_python");
  if (job.options.module) flags.push_back("--module");
  if (job.options.no_local_rank) flags.push_back("--no_local_rank");
  return flags;
}

std::vector<std::string> program_words(const RemoteJob& job) {
  std::vector<std::string> words = {job.options.user_script};
  append(words, job.options.user_args);
  return words;
}

// Slots per node, which MPICH, Intel MPI and MVAPICH need to be equal.
int equal_slots(const RemoteJob& job) {
  int per_node = static_cast<int>(job.world.front().slots.size());
  for (const auto& h : job.world) {
    if (static_cast<int>(h.slots.size()) != per_node) {
      throw Error(ErrorKind::Usage, job.options.launcher + " requires same number of devices per node; the world is " +
                                        describe(job.world) + ". Use --num_gpus to even it out.");
    }
  }
  return per_node;
}

// The job's store secret among the exports, or null.
const std::string* store_secret(const RemoteJob& job) {
  for (const auto& [k, v] : job.exports) {
    if (k == kStoreSecretVar) return &v;
  }
  return nullptr;
}

// Hydra's mpirun (MPICH, Intel MPI, MVAPICH2): the secret by name, its value from the environment.
void pass_secret_by_name(const std::vector<EnvVar>& exports, BackendCommand& c) {
  for (const auto& [k, v] : exports) {
    if (k != kStoreSecretVar) continue;
    append(c.argv, {"-genvlist", k});
    c.env.emplace_back(k, v);
  }
}

// Which restart a node agent or rank shim belongs to (TORCHELASTIC_RESTART_COUNT); absent when
// the job has no restarts, so that such commands stay DeepSpeed's.
std::vector<std::string> restart_flags(const LaunchOptions& o) {
  if (o.max_restarts == 0) return {};
  return {"--max_restarts=" + std::to_string(o.max_restarts), "--dsx_restart_count=" + std::to_string(o.restart_count)};
}

}  // namespace

std::vector<std::string> agent_argv(const RemoteJob& job, const std::string& node_rank, const std::string& tether) {
  const auto& o = job.options;
  std::vector<std::string> argv = {job.dsx_path, "launch", "--world_info=" + encode_world_info(job.world),
                                   "--node_rank=" + node_rank, "--master_addr=" + job.master_addr,
                                   "--master_port=" + std::to_string(o.master_port)};
  append(argv, program_flags(job));
  if (o.save_pid) append(argv, {"--save_pid", std::to_string(job.runner_pid)});
  argv.push_back("--enable_each_rank_log=" + o.enable_each_rank_log);
  if (o.bind_cores_to_rank) argv.push_back("--bind_cores_to_rank");
  if (!o.bind_core_list.empty()) argv.push_back("--bind_core_list=" + o.bind_core_list);
  argv.push_back("--log_level=" + (o.quiet ? std::string("error") : o.log_level));
  argv.push_back("--local_rank_rule=" + o.local_rank_rule);
  argv.push_back("--kill_grace_s=" + std::to_string(o.kill_grace_s));
  append(argv, restart_flags(o));
  argv.push_back("--dsx_tether=" + tether);
  append(argv, program_words(job));
  return argv;
}

std::string remote_shell_command(const RemoteJob& job, const std::string& node_rank, const std::string& tether) {
  std::string cmd;
  if (store_secret(job)) {
    // Not on the command line: the first line of stdin (ssh fan-out) or ssh's environment (pdsh).
    cmd += tether == "stdin"
               ? std::string("IFS= read -r ") + kStoreSecretVar + " && export " + kStoreSecretVar + "; "
               : std::string("export ") + kStoreSecretVar + "=\"${" + kStoreSecretOverSsh +
                     ":?no store secret reached this node - its sshd must accept LC_ variables, "
                     "AcceptEnv LANG LC_*, or use --launcher ssh}\"; unset " + kStoreSecretOverSsh + "; ";
  }
  if (!job.options.venv_script.empty()) cmd += "source " + shell_quote(job.options.venv_script) + "; ";
  for (const auto& [k, v] : job.exports) {
    if (k != kStoreSecretVar) cmd += "export " + k + "=" + shell_quote(v) + "; ";
  }
  cmd += "cd " + shell_quote(job.cwd) + " && exec ";
  // pdsh substitutes %n (the node's index) in the words it sends; keep that one unquoted.
  cmd += join(agent_argv(job, node_rank, tether), " ",
              [](const std::string& word) { return word == "--node_rank=%n" ? word : shell_quote(word); });
  return cmd;
}

std::vector<std::string> rank_shim_argv(const RemoteJob& job) {
  std::vector<std::string> argv = {job.dsx_path, "launch", "--dsx_rank_shim"};
  append(argv, program_flags(job));
  argv.push_back("--kill_grace_s=" + std::to_string(job.options.kill_grace_s));
  append(argv, restart_flags(job.options));
  append(argv, program_words(job));
  return argv;
}

std::vector<std::string> ssh_options(int port, const std::vector<std::string>& extra) {
  std::vector<std::string> opts = {"-o", "BatchMode=yes"};
  if (port > 0) append(opts, {"-p", std::to_string(port)});
  append(opts, extra);
  return opts;
}

BackendCommand pdsh_command(const RemoteJob& job) {
  BackendCommand c;
  c.argv = {"pdsh", "-S", "-f", "1024", "-w", host_list(job.world)};
  append(c.argv, shell_split(job.options.launcher_args));
  c.argv.push_back(remote_shell_command(job, "%n", "parent"));
  c.env.emplace_back("PDSH_RCMD_TYPE", "ssh");
  if (const std::string* secret = store_secret(job)) c.env.emplace_back(kStoreSecretOverSsh, *secret);
  return c;
}

std::vector<BackendCommand> ssh_commands(const RemoteJob& job) {
  std::vector<BackendCommand> commands;
  auto opts = ssh_options(job.options.ssh_port, shell_split(job.options.launcher_args));
  for (size_t n = 0; n < job.world.size(); ++n) {
    BackendCommand c;
    c.node = job.world[n].host;
    c.argv = {"ssh"};
    append(c.argv, opts);
    c.argv.push_back(c.node);
    c.argv.push_back(remote_shell_command(job, std::to_string(n), "stdin"));
    if (const std::string* secret = store_secret(job)) c.stdin_text = *secret + "\n";
    commands.push_back(std::move(c));
  }
  return commands;
}

BackendCommand mpi_command(const RemoteJob& job) {
  const auto& o = job.options;
  int total = world_size(job.world);
  auto user_args = shell_split(o.launcher_args);
  std::vector<EnvVar> exports = job.exports;
  exports.emplace_back("MASTER_ADDR", job.master_addr);
  exports.emplace_back("MASTER_PORT", std::to_string(o.master_port));
  BackendCommand c;
  if (o.launcher == "openmpi") {
    std::string hosts = join(job.world, ",", [](const auto& h) { return h.host + ":" + std::to_string(h.slots.size()); });
    c.argv = {"mpirun", "-n", std::to_string(total), "--host", hosts, "--mca", "btl", "^openib"};
    append(c.argv, user_args);
    exports.emplace_back("UCX_TLS", "tcp");
    for (const auto& [k, v] : exports) {
      if (k == kStoreSecretVar) {
        append(c.argv, {"-x", k});  // by name: mpirun sends the value from its environment
        c.env.emplace_back(k, v);
      } else {
        append(c.argv, {"-x", k + "=" + v});
      }
    }
  } else if (o.launcher == "mpich" || o.launcher == "impi") {
    int per_node = equal_slots(job);
    c.argv = {"mpirun", "-n", std::to_string(total), "-ppn", std::to_string(per_node)};
    append(c.argv, user_args);
    exports.emplace_back("WORLD_SIZE", std::to_string(total));
    exports.emplace_back("LOCAL_SIZE", std::to_string(per_node));
    if (o.launcher == "impi") exports.emplace_back("I_MPI_PIN", "0");
    for (const auto& [k, v] : exports) {
      if (k != kStoreSecretVar) append(c.argv, {"-genv", k, v});
    }
    pass_secret_by_name(exports, c);
    append(c.argv, {"-hosts", host_list(job.world)});
  } else if (o.launcher == "mvapich") {
    int per_node = equal_slots(job);
    c.argv = {"mpirun", "-np", std::to_string(total), "-ppn", std::to_string(per_node), "-hosts", host_list(job.world)};
    append(c.argv, user_args);
    for (const auto& kv : std::vector<EnvVar>{{"MV2_SMP_USE_CMA", "0"}, {"MV2_DEBUG_SHOW_BACKTRACE", "1"}, {"MV2_USE_CUDA", "1"},
                                              {"MV2_SUPPORT_DL", "1"}, {"MV2_ENABLE_AFFINITY", "0"},
                                              {"MV2_INTER_ALLGATHER_TUNING", "5"}, {"MV2_CUDA_USE_NAIVE", "0"}})
      exports.push_back(kv);
    for (const auto& [k, v] : exports) {
      if (k != kStoreSecretVar) append(c.argv, {"-env", k + "=" + v});
    }
    pass_secret_by_name(exports, c);
  } else {
    throw Error(ErrorKind::Usage, "Unknown launcher " + o.launcher);
  }
  append(c.argv, rank_shim_argv(job));
  return c;
}

BackendCommand slurm_command(const RemoteJob& job) {
  const auto& o = job.options;
  int per_node = static_cast<int>(job.world.front().slots.size());
  bool equal = std::all_of(job.world.begin(), job.world.end(), [&](const HostSlots& h) { return static_cast<int>(h.slots.size()) == per_node; });
  if (!equal) {
    throw Error(ErrorKind::Usage, "slurm: dsx starts the same number of tasks on every node, but the world is " +
                                      describe(job.world) + ". Use --num_gpus to even it out.");
  }
  BackendCommand c;
  c.argv = {"srun", "-n", std::to_string(world_size(job.world)), "--nodes=" + std::to_string(job.world.size()),
            "--ntasks-per-node=" + std::to_string(per_node), "--nodelist=" + host_list(job.world),
            "--kill-on-bad-exit=1"};  // a failing rank stops the job step (fail-fast on every node)
  append(c.argv, shell_split(o.launcher_args));
  c.argv.push_back("--export=ALL");  // srun passes its own environment: set below, raw values
  c.env = job.exports;
  c.env.emplace_back("MASTER_ADDR", job.master_addr);
  c.env.emplace_back("MASTER_PORT", std::to_string(o.master_port));
  append(c.argv, rank_shim_argv(job));
  return c;
}

std::string display_command(const BackendCommand& command) {
  std::string out;
  for (const auto& [k, v] : command.env) {
    // The secret stays out of what is printed, as it stays out of /proc/*/cmdline.
    const bool secret = k == kStoreSecretVar || k == kStoreSecretOverSsh;
    out += k + "=" + (secret ? std::string("<hidden>") : shell_quote(v)) + " ";
  }
  return out + shell_join(command.argv);
}

}  // namespace dsx::launcher
