// How many slots this machine offers when there is no hostfile: its NVIDIA GPUs, or on a host
// without GPUs one process per NUMA node (DeepSpeed's CPU accelerator rule). Read from /dev and
// /sys, so the launcher needs no CUDA library.
#pragma once

#include <string>

namespace dsx::launcher {

struct LocalDevices {
  int count = 0;
  bool gpus = false;
};

// Where the counts are read; tests point these at folders of fake entries.
struct DeviceDirs {
  std::string dev = "/dev";                             // nvidia0, nvidia1, ... (not nvidiactl)
  std::string numa_nodes = "/sys/devices/system/node";  // node0, node1, ...
};

LocalDevices detect_local_devices(const DeviceDirs& dirs = {});

}  // namespace dsx::launcher
