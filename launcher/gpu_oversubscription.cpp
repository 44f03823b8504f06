// Counting the ranks of the local node against the GPUs it shows (see gpu_oversubscription.h).
#include "launcher/gpu_oversubscription.h"

#include <set>

#include "launcher/comma_list.h"

namespace dsx::launcher {
namespace {

std::string count_of(size_t n, const std::string& noun) {
  return std::to_string(n) + " " + noun + (n == 1 ? "" : "s");
}

// The distinct ids of a CUDA_VISIBLE_DEVICES list; non-numbers (UUIDs, MIG names) count too.
size_t distinct_ids(const std::string& text) {
  std::set<std::string> ids;
  for (const std::string& id : split_commas(text)) {
    if (!id.empty()) ids.insert(id);
  }
  return ids.size();
}

}  // namespace

std::optional<std::string> gpu_oversubscription_warning(const LaunchPlan& plan, const LocalMachine& machine) {
  if (plan.multi_node || plan.node_rank < 0 || plan.node_rank >= static_cast<int>(plan.world.size())) {
    return std::nullopt;  // other machines' GPUs are unknown here
  }
  const auto& node = plan.world[plan.node_rank];
  const size_t ranks = node.slots.size();

  size_t gpus = 0;
  std::string source;
  // Without a hostfile the runner's CUDA_VISIBLE_DEVICES is the set the user allowed; with one
  // the ranks' variable is rewritten from the slots, so only the GPUs the host has count.
  if (!plan.hostfile_mode && !machine.visible_devices.empty()) {
    gpus = distinct_ids(machine.visible_devices);
    source = "CUDA_VISIBLE_DEVICES=" + machine.visible_devices;
  } else if (machine.has_gpus) {
    gpus = static_cast<size_t>(machine.device_count);
    source = "found on this host";
  } else {
    return std::nullopt;  // a CPU host: slots are processes, not GPUs
  }
  if (ranks <= gpus) return std::nullopt;
  return "warning: " + count_of(ranks, "rank") + " on " + node.host + " but " + count_of(gpus, "GPU") + " visible (" +
         source + "): ranks will share GPUs. NCCL refuses two ranks of one communicator on one GPU; run such a job "
         "over the ofi backend (DSX_COMM_BACKEND=ofi), or launch at most " + count_of(gpus, "rank") +
         " (--num_gpus " + std::to_string(gpus) + ").";
}

}  // namespace dsx::launcher
