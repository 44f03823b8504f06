// Host facts for `dsx report`: CPU model and SIMD, network interfaces, RDMA devices, the
// communication-related environment variables, and how many nodes the job spans.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "tools/report/environment.h"

namespace dsx::report {

CpuInfo probe_cpu();
std::vector<std::string> network_interfaces();
std::vector<std::string> rdma_devices();  // entries of /sys/class/infiniband (HCAs, EFA devices)

// Set variables a multi-GPU job cares about (NCCL_*, FI_*, OFI_NCCL_*, RDMAV_*, TORCH_NCCL_*,
// CUDA_VISIBLE_DEVICES, MASTER_ADDR, ...), sorted by name.
std::vector<std::pair<std::string, std::string>> communication_variables();

// nodes_flag > 0 wins; then CROSS_SIZE, WORLD_SIZE / LOCAL_WORLD_SIZE, Open MPI's and Slurm's
// counts; else one node.
JobInfo probe_job(int nodes_flag);

}  // namespace dsx::report
