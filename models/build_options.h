// How the engine wants a model built, whatever its family: device, element type, the largest
// batch it will be handed, activation checkpointing and the stream to compute on.
#pragma once

#include "kernels/dtype.h"

namespace dsx::models {

struct ModelBuildOptions {
  bool cuda = false;                           // GPU (needs a CUDA build) or CPU
  kernels::DType dtype = kernels::DType::F32;  // CPU: F32; CUDA: F32, BF16 or F16
  int max_batch = 1, max_seq = 1;
  bool activation_checkpointing = false;       // the ds_config's activation_checkpointing block
  // CPU, ds_config bf16: the GEMMs take bf16 operands (models that have set_bf16_gemms; the others
  // multiply in fp32). Parameters stay fp32.
  bool cpu_bf16_gemms = false;
  // CUDA: the stream to compute on (a cudaStream_t: the compute stream of the device ZeRO keeps
  // its state on); null: a stream of the model's own.
  void* stream = nullptr;
};

}  // namespace dsx::models
