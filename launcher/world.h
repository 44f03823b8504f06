// The world of a launch: the ordered list of hosts and, per host, the slot ids (GPU ids on GPU
// hosts, process indices on CPU hosts) that get one rank each. Order = hostfile order = node
// rank order = global rank order, as in DeepSpeed.
#pragma once

#include <string>
#include <vector>

namespace dsx::launcher {

struct HostSlots {
  std::string host;
  std::vector<int> slots;
  bool operator==(const HostSlots&) const = default;
};

using World = std::vector<HostSlots>;

// Sum of slot counts over all hosts: the WORLD_SIZE of a launch.
int world_size(const World& world);

// Index of `host` in `world`, or -1.
int find_host(const World& world, const std::string& host);

// "{host: [0, 1], ...}" for messages.
std::string describe(const World& world);

}  // namespace dsx::launcher
