// The runner's decisions before anything starts, in DeepSpeed's order: which hosts and slots
// take part (hostfile, CUDA_VISIBLE_DEVICES, --include/--exclude, --num_nodes, --num_gpus), the
// master address where it is already known, and whether the job is multi-node. Pure: the
// machine's facts (hostfile contents, device count, environment) come in as arguments.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "launcher/hostfile.h"
#include "launcher/launch_options.h"
#include "launcher/world.h"

namespace dsx::launcher {

struct LocalMachine {
  int device_count = 0;          // GPUs, or process slots on a CPU host
  bool has_gpus = false;         // false: CUDA_VISIBLE_DEVICES ids are not checked against devices
  std::string visible_devices;   // CUDA_VISIBLE_DEVICES of the runner ("" when unset)
};

struct LaunchPlan {
  World world;               // active resources, hostfile order
  bool hostfile_mode = false;
  bool multi_node = false;
  std::string master_addr;   // "" = to be resolved from the first host (hostfile mode)
  int node_rank = 0;         // the node a local launch runs (DeepSpeed: 0 unless --no_ssh)
  bool drop_visible_devices = false;  // the runner consumed CUDA_VISIBLE_DEVICES
  std::vector<std::string> notes;     // informational messages for the user
};

// Throws dsx::Error(Usage) with DeepSpeed's messages on contradictory flags.
LaunchPlan plan_launch(const LaunchOptions& options,
                       const std::optional<std::vector<HostfileEntry>>& hostfile,
                       const LocalMachine& machine);

}  // namespace dsx::launcher
