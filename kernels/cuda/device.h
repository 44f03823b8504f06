// Moved: the process's choice of GPU lives in device/cuda_device.h (the device layer is the one
// home of the CUDA runtime, issue 32). This forwarding header remains only for the CUDA model
// files that still include it (models/llama/llama_cuda.cpp); delete
// it once they include device/cuda_device.h. Nothing in kernels/ may include it.
#pragma once

#include "device/cuda_device.h"

namespace dsx::kernels::cuda {

using device::chosen_device;
using device::use_chosen_device;
using device::use_rank_device;

}  // namespace dsx::kernels::cuda
