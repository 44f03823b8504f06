// The three ways `dsx launch` runs: the runner (`deepspeed` drop-in: plan the world, check,
// start locally or through a backend), the node agent (`--world_info`, DeepSpeed's per-node
// launcher), and the rank shim (`--dsx_rank_shim`, under mpirun/srun).
#pragma once

#include "launcher/launch_options.h"
#include "launcher/node_agent.h"

namespace dsx::launcher {

int run_launch(const LaunchOptions& options);
// What run_launch would start (hostfile, devices, --include/--exclude, --num_nodes, --num_gpus),
// without starting anything. `dsx autotune` needs it to write the batch triad of its trials.
struct PlannedWorld {
  int ranks = 0;
  int nodes = 0;
  bool multi_node = false;
};
PlannedWorld planned_world(const LaunchOptions& options);
int run_agent(const AgentOptions& options, bool dry_run);
// Runs one rank under mpirun/srun; a failure prints the marker the runner watches for.
// `restart_count` and `max_restarts` become the rank's TORCHELASTIC_* variables.
int run_rank_shim(const ProgramSpec& program, int kill_grace_s, int restart_count, int max_restarts);

}  // namespace dsx::launcher
