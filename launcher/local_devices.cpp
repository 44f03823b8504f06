// Counting GPUs (/dev/nvidiaN) and NUMA nodes (/sys/devices/system/node/nodeN).
#include "launcher/local_devices.h"

#include <cctype>
#include <filesystem>
#include <string>

namespace dsx::launcher {
namespace {

int count_numbered(const std::string& dir, const std::string& prefix) {
  std::error_code ec;
  int n = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    std::string name = entry.path().filename().string();
    if (name.size() > prefix.size() && name.rfind(prefix, 0) == 0 &&
        std::isdigit(static_cast<unsigned char>(name[prefix.size()])))
      ++n;
  }
  return n;
}

}  // namespace

LocalDevices detect_local_devices(const DeviceDirs& dirs) {
  int gpus = count_numbered(dirs.dev, "nvidia");
  if (gpus > 0) return {gpus, true};
  int numa = count_numbered(dirs.numa_nodes, "node");
  return {numa > 0 ? numa : 1, false};
}

}  // namespace dsx::launcher
