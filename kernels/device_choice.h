// Which GPU a rank trains on: the LOCAL_RANK-th of the devices CUDA_VISIBLE_DEVICES leaves
// visible, as torchrun and the deepspeed launcher expect. Pure functions, so the rule is tested
// on machines without a GPU; kernels/cuda/device.h applies it.
#pragma once

#include <string>

namespace dsx::kernels {

// LOCAL_RANK's value (nullptr or "" when unset: 0). Throws Error(Usage) for anything but a
// non-negative integer.
int parse_local_rank(const char* value);

// The device of local rank `local_rank` among `visible_devices`. Throws Error(Unsupported) when
// no GPU is visible and Error(Config) when local_rank >= visible_devices (more ranks on this node
// than GPUs): sharing a GPU silently would halve every rank's memory and speed.
// `visible_list` (CUDA_VISIBLE_DEVICES, may be empty) only goes into the message.
int choose_device(int local_rank, int visible_devices, const std::string& visible_list = "");

}  // namespace dsx::kernels
