// The commands a multi-node launch runs, one builder per backend (pdsh, ssh, openmpi, mpich,
// impi, mvapich, slurm). Builders are pure: they turn the job into argv + environment, which
// --dry_run prints and the runner starts. Remote shells get single-quoted words (no injection);
// mpirun and srun get raw values because no shell re-reads them.
#pragma once

#include <string>
#include <vector>

#include "launcher/launch_options.h"
#include "launcher/rank_command.h"
#include "launcher/rank_env.h"
#include "launcher/world.h"

namespace dsx::launcher {

struct RemoteJob {
  World world;                 // active resources
  std::string master_addr;
  std::vector<EnvVar> exports; // variables for every node (env_export.h)
  std::string cwd;             // absolute; every node must have it
  std::string dsx_path;        // absolute path of this dsx binary; every node must have it
  std::string hostfile;        // the hostfile path (openmpi)
  int runner_pid = 0;
  LaunchOptions options;
};

// The job's store secret (DSX_STORE_SECRET) never appears on a command line, where `ps` on any
// node shows it to every user: the ssh fan-out sends it as the first line of the remote shell's
// stdin, pdsh through ssh's environment (LC_DSX_STORE_SECRET, which sshd accepts by its usual
// `AcceptEnv LANG LC_*`), mpirun and srun through their environment by name.
inline constexpr const char* kStoreSecretVar = "DSX_STORE_SECRET";
inline constexpr const char* kStoreSecretOverSsh = "LC_DSX_STORE_SECRET";

struct BackendCommand {
  std::string node;                 // the host this command is for; "" = all nodes at once
  std::vector<std::string> argv;
  std::vector<EnvVar> env;          // set on top of the runner's environment
  std::string stdin_text;           // written to the command's stdin first (the ssh fan-out's secret)
};

// `dsx launch --world_info=...` with the per-node flags: the node agent.
std::vector<std::string> agent_argv(const RemoteJob& job, const std::string& node_rank, const std::string& tether);

// The shell text a remote node runs: [source venv;] exports; cd; exec agent.
std::string remote_shell_command(const RemoteJob& job, const std::string& node_rank, const std::string& tether);

// `dsx launch --dsx_rank_shim ...`: the per-rank wrapper under mpirun/srun that maps the
// scheduler's variables to RANK, LOCAL_RANK, ... and then execs the program.
std::vector<std::string> rank_shim_argv(const RemoteJob& job);

// ssh options shared by every ssh use: -p, BatchMode, plus `extra` (e.g. --launcher_args).
std::vector<std::string> ssh_options(int port, const std::vector<std::string>& extra);

BackendCommand pdsh_command(const RemoteJob& job);
std::vector<BackendCommand> ssh_commands(const RemoteJob& job);
BackendCommand mpi_command(const RemoteJob& job);  // job.options.launcher: openmpi, mpich, impi, mvapich
BackendCommand slurm_command(const RemoteJob& job);

// "K=V ... argv" as one shell-quoted line, for --dry_run; the store secret's value shows as <hidden>.
std::string display_command(const BackendCommand& command);

}  // namespace dsx::launcher
