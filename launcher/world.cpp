// Small helpers over World.
#include "launcher/world.h"

namespace dsx::launcher {

int world_size(const World& world) {
  int total = 0;
  for (const auto& h : world) total += static_cast<int>(h.slots.size());
  return total;
}

int find_host(const World& world, const std::string& host) {
  for (size_t i = 0; i < world.size(); ++i)
    if (world[i].host == host) return static_cast<int>(i);
  return -1;
}

std::string describe(const World& world) {
  std::string out = "{";
  for (size_t i = 0; i < world.size(); ++i) {
    if (i) out += ", ";
    out += world[i].host + ": [";
    for (size_t j = 0; j < world[i].slots.size(); ++j) {
      if (j) out += ", ";
      out += std::to_string(world[i].slots[j]);
    }
    out += "]";
  }
  return out + "}";
}

}  // namespace dsx::launcher
