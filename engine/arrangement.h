// Where ZeRO's state lives and which backend carries its collectives, decided once at start from
// where the model computes and the ds_config's offload settings (issue: the backend follows the
// buffers, never just whether a GPU is visible):
//
//   model on the CPU                       ZeRO in host memory, ofi
//   model on a GPU, offload_* device cpu   ZeRO in host memory (ZeRO-Offload), ofi
//   model on a GPU, no offload             ZeRO in GPU memory (the cuda device), nccl
//
// Ranks that share a GPU (more on a node than it has GPUs) keep ZeRO in GPU memory but talk over
// ofi, which stages GPU memory through the host, since NCCL refuses two ranks on one GPU.
// DSX_COMM_BACKEND may still name a backend: ofi works with either arrangement (it stages device
// memory through the host); nccl with host-memory ZeRO is refused, since NCCL reads device memory.
#pragma once

#include <string>

namespace dsx::engine {

struct ArrangementInputs {
  bool model_on_gpu = false;
  bool offload_optimizer = false;  // zero_optimization.offload_optimizer.device != none
  bool offload_param = false;
  bool device_resident_supported = false;  // device_resident_zero_built()
  bool ranks_share_a_gpu = false;          // more ranks on this node than GPUs (NCCL refuses that)
  std::string backend_request = "auto";    // DSX_COMM_BACKEND, or "auto"
};

struct Arrangement {
  bool zero_on_gpu = false;
  std::string backend;  // "ofi" or "nccl"
  std::string summary;  // one line for the start-up summary and `dsx config check`
};

// Throws Error(Config) for a backend that cannot carry these buffers.
Arrangement choose_arrangement(const ArrangementInputs& in);

// This build can keep ZeRO in GPU memory for a GPU model (it has CUDA).
bool device_resident_zero_built();

}  // namespace dsx::engine
