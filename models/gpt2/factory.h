// Builds a GPT-2 for a device and element type, so the engine can pick CPU or CUDA, fp32 or bf16
// and activation checkpointing from the ds_config without naming the model classes.
#pragma once

#include <memory>

#include "kernels/dtype.h"
#include "models/gpt2/config.h"
#include "models/model.h"

namespace dsx::models {

struct GPT2Options {
  bool cuda = false;                         // GPU (needs a CUDA build) or CPU
  kernels::DType dtype = kernels::DType::F32;  // CPU: F32; CUDA: F32, BF16 or F16
  int max_batch = 1, max_seq = 1;
  bool activation_checkpointing = false;     // the ds_config's activation_checkpointing block
  // CUDA: the stream to compute on (a cudaStream_t: the compute stream of the device ZeRO keeps
  // its state on); null: a stream of the model's own.
  void* stream = nullptr;
};

// Throws Error(Unsupported) for a combination this build cannot run (CUDA without a CUDA build,
// a 16-bit CPU model).
std::unique_ptr<Model> make_gpt2(const GPT2Config& config, const GPT2Options& options);

// GPUs this process can use: 0 in a build without CUDA, or where no driver or GPU is present.
int cuda_device_count();

}  // namespace dsx::models
