// What tests may ask the emulated GPU (only in a DSX_CUDA=EMULATED build, DSX_CUDA_EMULATED).
#pragma once

#include <cstdint>
#include <string>

namespace dsx::emu {

// Host synchronisations so far in this process: cudaStreamSynchronize, cudaEventSynchronize,
// cudaDeviceSynchronize, synchronous copies, and each distinct point a query polled.
uint64_t host_syncs();
// Those the calling thread made: what a training loop waits for, without the polls of a
// communicator's watchdog thread (NCCL's, for its Work), which never hold the loop up.
uint64_t host_syncs_of_this_thread();
// The fault that made GPU `device`'s error sticky (a race, a deadlocked block, ...), or "".
std::string fault_message(int device);

}  // namespace dsx::emu
