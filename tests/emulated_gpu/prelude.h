// Force-included (-include) into every CUDA source the emulated GPU build compiles with the host
// compiler: the real CUDA headers first, then what nvcc would have provided for device code. A
// kernel becomes a host function that the emulator runs once per GPU thread, each thread a fiber
// (block_runner.h), so the built-in variables below are the running fiber's.
#pragma once

// Shared memory must go through DSX_SHARED (kernels/cuda/launch.cuh) so that the race check sees
// every access; a bare __shared__ would silently become a per-thread local under a host compiler.
#define __shared__ dsx_emulated_gpu_needs_DSX_SHARED_not___shared__
#define __launch_bounds__(...)

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <device_launch_parameters.h>

#include "tests/emulated_gpu/device_functions.h"

#define threadIdx (::dsx::emu::this_thread().thread_idx)
#define blockIdx (::dsx::emu::this_thread().block->block_idx)
#define blockDim (::dsx::emu::this_thread().block->block_dim)
#define gridDim (::dsx::emu::this_thread().block->grid_dim)
#define warpSize 32
