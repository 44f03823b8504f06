// `dsx torchrun`: torchrun's flags, resolved (tools/cmd_torchrun.cpp reads the command line,
// PET_* variables and, under srun, SLURM_*). torchrun's names; the values dsx runs with.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "launcher/rank_command.h"

namespace dsx::launcher {

struct TorchrunOptions {
  int nproc_per_node = 1;
  int nnodes = 1;     // --nnodes N, or MAX of MIN:MAX
  int min_nodes = 1;  // MIN of MIN:MAX (== nnodes for a fixed count): elastic membership below it
  int node_rank = -1;                   // the static backend's --node_rank (0 when not given)
  bool static_backend = true;           // false: c10d (or --standalone)
  std::string rdzv_host = "127.0.0.1";  // where the rendezvous is served
  int rdzv_port = 29500;                // 0: a free one (--standalone)
  std::string run_id = "none";
  int max_restarts = 0;
  std::string role = "default";
  std::string local_addr;      // the address this node gives the others ("" : as seen by the store)
  std::string log_dir;         // "" : no per-rank files
  std::vector<int> redirects;  // per local rank: 0 none, 1 stdout, 2 stderr, 3 both to files
  std::vector<int> tee;        // per local rank, the same: to files and the console
  std::vector<int> local_ranks_filter;  // local ranks whose output reaches the console (empty: all)
  std::chrono::seconds join_timeout{600};
  std::chrono::seconds last_call_timeout{30};  // --nnodes MIN:MAX: the wait for more after MIN
  int kill_grace_s = 30;  // torchrun's shutdown grace (TORCH_ELASTIC_SHUTDOWN_TIMEOUT)
  std::string python;     // PYTHON_EXEC, else dsx's choice (find_python)
  ProgramSpec program;    // no_local_rank always: torchrun passes ranks in the environment
};

// Runs this node's agent: meets the other nodes, runs the ranks, restarts with them; returns the
// job's exit code.
int run_torchrun(const TorchrunOptions& options);

}  // namespace dsx::launcher
