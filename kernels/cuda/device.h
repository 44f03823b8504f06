// This process's GPU. The first call of use_rank_device chooses it (kernels/device_choice.h:
// LOCAL_RANK among the visible devices; shared round-robin only with DSX_COMM_BACKEND=ofi) and
// every call makes it current on the calling thread.
// CUDA keeps the current device per thread and starts each thread on device 0, so every thread
// that touches CUDA calls it first - otherwise each rank of a node would work on GPU 0.
// Built only with CUDA.
#pragma once

namespace dsx::kernels::cuda {

// Chooses the device from LOCAL_RANK and DSX_COMM_BACKEND on the first call of the process;
// returns it. Throws dsx::Error when no GPU is visible or LOCAL_RANK has none.
int use_rank_device();
// The same with the local rank and sharing rule given (the nccl backend: the rendezvous's local
// rank, never shared). A later call that would pick another device is an error: one process,
// one GPU.
int use_rank_device(int local_rank, bool may_share);

// The device chosen earlier in this process, or -1 when none was. Touches no CUDA: a CPU run of
// a CUDA build asks this before it would create a context.
int chosen_device();

// Makes the chosen device current on this thread and returns it; -1 (and no CUDA call) when none
// was chosen.
int use_chosen_device();

}  // namespace dsx::kernels::cuda
