// The cuda device (CUDA builds only): see device/device.h for the rules and cuda_device.cpp for
// the mapping onto CUDA.
#pragma once

#include <memory>

#include "device/device.h"

namespace dsx::device {

// The device of this ordinal (the rank's GPU: LOCAL_RANK among the visible ones).
std::unique_ptr<Device> make_cuda_device(int ordinal);

}  // namespace dsx::device
