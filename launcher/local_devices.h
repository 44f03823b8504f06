// How many slots this machine offers when there is no hostfile: its NVIDIA GPUs, or on a host
// without GPUs one process per NUMA node (DeepSpeed's CPU accelerator rule). Read from /dev and
// /sys, so the launcher needs no CUDA library.
#pragma once

namespace dsx::launcher {

struct LocalDevices {
  int count = 0;
  bool gpus = false;
};

LocalDevices detect_local_devices();

}  // namespace dsx::launcher
