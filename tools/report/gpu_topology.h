// GPUs and how they connect (NVLink, PCIe switch, host bridge, NUMA), read through NVML loaded
// at run time: the `nvidia-smi topo -m` part of `dsx report`. Without a driver it returns no
// GPUs and says why.
#pragma once

#include "tools/report/environment.h"

namespace dsx::report {

GpuTopology probe_gpu_topology();

}  // namespace dsx::report
