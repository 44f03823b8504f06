// DeepSpeed runner order of operations (ref/launcher.md 1.1), steps 1-6 and 10-12.
#include "launcher/launch_plan.h"

#include <algorithm>
#include <numeric>

#include "dsx/error.h"
#include "launcher/comma_list.h"
#include "launcher/resource_filter.h"

namespace dsx::launcher {
namespace {

std::vector<int> iota_slots(int n) {
  std::vector<int> v(std::max(n, 0));
  std::iota(v.begin(), v.end(), 0);
  return v;
}

// "1,3" -> {1, 3}; the ids are checked against the device count on GPU hosts.
std::vector<int> parse_visible_devices(const std::string& text, const LocalMachine& machine) {
  std::vector<int> ids;
  for (const std::string& item : split_commas(text)) {
    bool digits = !item.empty() && item.size() < 9 &&
                  std::all_of(item.begin(), item.end(), [](char c) { return c >= '0' && c <= '9'; });
    if (!digits) {
      throw Error(ErrorKind::Usage, "CUDA_VISIBLE_DEVICES='" + text + "': '" + item +
                                        "' is not a device index; use a list like 0,1,3 or unset it");
    }
    int id = std::stoi(item);
    if (machine.has_gpus && id >= machine.device_count) {
      throw Error(ErrorKind::Usage, "CUDA_VISIBLE_DEVICES='" + text + "' names device " + item + " but this host has " +
                                        std::to_string(machine.device_count) + " GPU(s)");
    }
    ids.push_back(id);
  }
  return ids;
}

// The flag combinations refused before any host is looked at.
void check_launch_flags(const LaunchOptions& o) {
  if (o.elastic_training && o.master_addr.empty()) {
    throw Error(ErrorKind::Usage, "--elastic_training needs --master_addr (the rendezvous host)");
  }
  if (o.num_gpus_given && o.num_gpus <= 0) {
    // DeepSpeed treats 0 and negatives as "not given" and starts every slot; dsx refuses.
    throw Error(ErrorKind::Usage, "--num_gpus " + std::to_string(o.num_gpus) +
                                      ": give the number of ranks per node (1 or more), or leave --num_gpus out to "
                                      "start one rank per slot");
  }
  const bool filtered = !o.include.empty() || !o.exclude.empty();
  if (filtered && (o.num_nodes >= 0 || o.num_gpus >= 0)) {
    throw Error(ErrorKind::Usage, "Cannot specify num_nodes/gpus with include/exclude");
  }
}

// Without a hostfile: localhost with this machine's devices (or those CUDA_VISIBLE_DEVICES names).
World local_pool(const LaunchOptions& o, const LocalMachine& machine, LaunchPlan& plan) {
  if (machine.device_count <= 0 && machine.visible_devices.empty()) {
    throw Error(ErrorKind::Launch, "Unable to proceed, no GPU resources available");
  }
  std::vector<int> local = iota_slots(machine.device_count);
  if (!machine.visible_devices.empty()) {
    // dsx rule: CUDA_VISIBLE_DEVICES names the physical devices this launch may use.
    local = parse_visible_devices(machine.visible_devices, machine);
    plan.drop_visible_devices = true;
    plan.notes.push_back("using CUDA_VISIBLE_DEVICES=" + machine.visible_devices + " as the devices of localhost");
  }
  if (plan.master_addr.empty()) plan.master_addr = "127.0.0.1";
  if (o.num_nodes > 1) {
    throw Error(ErrorKind::Usage, "Num nodes is >1 but no extra nodes available via hostfile (" + o.hostfile +
                                      " does not exist); pass -H/--hostfile");
  }
  return World{HostSlots{"localhost", local}};
}

// --num_gpus k: k slots per host (the first k visible devices where CUDA_VISIBLE_DEVICES gave them).
void limit_slots(int num_gpus, bool from_visible, World& world) {
  for (auto& h : world) {
    if (from_visible && num_gpus <= static_cast<int>(h.slots.size())) {
      h.slots.resize(num_gpus);  // the first k visible devices
    } else {
      h.slots = iota_slots(num_gpus);
    }
  }
}

void refuse_empty_hostfile(const LaunchOptions& o, const std::vector<HostfileEntry>& hostfile, const World& world) {
  const bool no_ranks = std::all_of(world.begin(), world.end(), [](const HostSlots& h) { return h.slots.empty(); });
  if (!no_ranks) return;
  std::string lines;
  for (const auto& e : hostfile) {
    if (e.slots == 0) lines += "\n  hostfile " + o.hostfile + ":" + std::to_string(e.line) + ": " + e.host + " slots=0";
  }
  throw Error(ErrorKind::Launch, "the hostfile gives no ranks to start (every host has slots=0):" + lines +
                                     "\nGive at least one host slots=N with N >= 1, or pass --num_gpus N.");
}

// The flags checked against the world that was chosen, and those that contradict each other.
void check_world_flags(const LaunchOptions& o, const World& world) {
  if (o.no_ssh) {
    if (o.node_rank < 0 || o.node_rank >= static_cast<int>(world.size())) {
      throw Error(ErrorKind::Usage, "--no_ssh needs --node_rank in [0, " + std::to_string(world.size()) +
                                        ") (one per host of the hostfile); got " + std::to_string(o.node_rank));
    }
    if (o.master_addr.empty()) {
      throw Error(ErrorKind::Usage, "--no_ssh needs --master_addr (the address of node 0, the same on every node)");
    }
  }
  if (o.no_local_rank && o.elastic_training) {
    throw Error(ErrorKind::Usage, "--no_local_rank cannot be used with --elastic_training");
  }
  if (o.module && o.no_python) {
    throw Error(ErrorKind::Usage, "--module and --no_python cannot be used together");
  }
}

}  // namespace

LaunchPlan plan_launch(const LaunchOptions& o, const std::optional<std::vector<HostfileEntry>>& hostfile,
                       const LocalMachine& machine) {
  check_launch_flags(o);
  LaunchPlan plan;
  plan.master_addr = o.master_addr;
  World pool;
  if (hostfile) {
    plan.hostfile_mode = true;
    for (const auto& e : *hostfile) pool.push_back({e.host, iota_slots(e.slots)});
  } else {
    pool = local_pool(o, machine, plan);
  }

  plan.world = filter_resources(pool, o.include, o.exclude);
  const bool filtered = !o.include.empty() || !o.exclude.empty();
  if (filtered && plan.world.empty()) {
    throw Error(ErrorKind::Usage, "--include/--exclude left no slots to launch on (hosts: " + describe(pool) + ")");
  }
  if (o.num_nodes > 0 && static_cast<int>(plan.world.size()) > o.num_nodes) plan.world.resize(o.num_nodes);
  if (o.num_gpus > 0) limit_slots(o.num_gpus, !hostfile && plan.drop_visible_devices, plan.world);
  if (hostfile) refuse_empty_hostfile(o, *hostfile, plan.world);

  check_world_flags(o, plan.world);
  if (o.no_ssh) plan.node_rank = o.node_rank;
  plan.multi_node = (o.force_multi || plan.world.size() > 1) && !o.no_ssh;
  return plan;
}

}  // namespace dsx::launcher
