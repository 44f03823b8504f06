// The cuda device (CUDA builds only): see device/device.h for the rules and cuda_device.cpp for
// the mapping onto CUDA.
#pragma once

#include <memory>

#include "device/device.h"

namespace dsx::device {

// This rank's GPU, as the process chose it (kernels/cuda/device.h: LOCAL_RANK among the visible
// devices, chosen on the first call of the process). Throws when no GPU is visible, and in a
// build without CUDA.
std::unique_ptr<Device> make_cuda_device();

}  // namespace dsx::device
