// Which GPU a rank trains on: the LOCAL_RANK-th of the devices CUDA_VISIBLE_DEVICES leaves
// visible, as torchrun and the deepspeed launcher expect. More ranks on a node than GPUs is an
// error, except where the ranks communicate over the ofi backend (host memory): then they may
// share GPUs round-robin, as dsx launch's oversubscription warning offers. Pure functions, so the
// rule is tested on machines without a GPU; device/cuda_device.h applies it.
#pragma once

#include <string>

namespace dsx::kernels {

// LOCAL_RANK's value (nullptr or "" when unset: 0). Throws Error(Usage) for anything but a
// non-negative integer.
int parse_local_rank(const char* value);

// The device of local rank `local_rank` among `visible_devices`. Throws Error(Unsupported) when
// no GPU is visible and Error(Config) when local_rank >= visible_devices (more ranks on this node
// than GPUs: sharing a GPU silently would halve every rank's memory and speed, and NCCL refuses
// it) - unless `may_share`, which gives local_rank modulo the count. `visible_list`
// (CUDA_VISIBLE_DEVICES, may be empty) only goes into the message.
int choose_device(int local_rank, int visible_devices, bool may_share = false, const std::string& visible_list = "");

// Whether ranks may share a GPU, from DSX_COMM_BACKEND's value (nullptr when unset): only over
// "ofi", whose collectives run on host memory.
bool ranks_may_share_gpu(const char* comm_backend);

}  // namespace dsx::kernels
