// The cuda device (CUDA builds only): see device/device.h for the rules and cuda_device.cpp for
// the mapping onto CUDA. Also the process's choice of GPU, which every user of CUDA in the
// process shares (one process, one GPU).
// CUDA keeps the current device per thread and starts each thread on device 0, so every thread
// that touches CUDA makes the chosen GPU current first (Device::make_current, use_rank_device,
// use_chosen_device) - otherwise each rank of a node would work on GPU 0.
#pragma once

#include <memory>

#include "device/device.h"

namespace dsx::device {

// This rank's GPU, as the process chose it (use_rank_device(): LOCAL_RANK among the visible
// devices, chosen on the first call of the process). Throws when no GPU is visible, and in a
// build without CUDA.
std::unique_ptr<Device> make_cuda_device();

// How many GPUs CUDA sees: 0 without a driver or a GPU, and in a build without CUDA.
int cuda_device_count();

// Chooses the GPU from LOCAL_RANK and DSX_COMM_BACKEND on the first call of the process
// (kernels/device_choice.h) and makes it current on the calling thread; returns it. Throws
// dsx::Error when no GPU is visible or LOCAL_RANK has none, and in a build without CUDA.
int use_rank_device();
// The same with the local rank and sharing rule given (the nccl backend: the rendezvous's local
// rank, never shared). A later call that would pick another device is an error.
int use_rank_device(int local_rank, bool may_share);
// The device chosen earlier in this process, or -1 when none was. Touches no CUDA: a CPU run of
// a CUDA build asks this before it would create a context.
int chosen_device();
// Makes the chosen device current on this thread and returns it; -1 (and no CUDA call) when none
// was chosen.
int use_chosen_device();
// Whether `data` is device (or managed) memory, asked on the chosen GPU (made current on this
// thread). False, with no CUDA call, when this process chose no GPU (a CPU run of a CUDA build,
// where asking would create a context on GPU 0) and in a build without CUDA.
bool is_device_pointer(const void* data);

}  // namespace dsx::device
