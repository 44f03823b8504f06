// How a family's factory (make_gpt2, make_llama) turns ModelBuildOptions into one of its classes:
// Cpu<float> on the CPU, Cuda<float, __nv_bfloat16 or __half> on the GPU, so the choice of
// element type and the refusals are written once for every family.
#pragma once

#include <memory>
#include <string>

#include "dsx/error.h"
#include "models/build_options.h"
#include "models/model.h"
#ifdef DSX_HAVE_CUDA
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>
#endif

namespace dsx::models {

// Reached for o.cuda only in a build without CUDA (a CUDA build takes make_cuda_model first).
// Throws Error(Unsupported) for that and for a 16-bit CPU model; `family` names it ("GPT-2").
template <template <class> class Cpu, class Config>
std::unique_ptr<Model> make_cpu_model(const char* family, const Config& config,
                                      const ModelBuildOptions& o) {
  if (o.cuda)
    throw Error(ErrorKind::Unsupported,
                std::string("this dsx was built without CUDA, so ") + family +
                    " runs on the CPU only; rebuild with -DDSX_CUDA=ON on a machine with "
                    "nvcc, or train without a GPU in the arrangement");
  if (o.dtype != kernels::DType::F32)
    throw Error(ErrorKind::Unsupported, std::string("the CPU ") + family + " trains in fp32, not " +
                                            kernels::dtype_name(o.dtype) +
                                            "; set bf16/fp16 \"enabled\": false for CPU runs");
  auto model = std::make_unique<Cpu<float>>(config, o.max_batch, o.max_seq, o.activation_checkpointing);
  if constexpr (requires { model->set_bf16_gemms(true); }) model->set_bf16_gemms(o.cpu_bf16_gemms);
  return model;
}

#ifdef DSX_HAVE_CUDA
template <template <class> class Cuda, class Config>
std::unique_ptr<Model> make_cuda_model(const Config& config, const ModelBuildOptions& o) {
  auto stream = static_cast<cudaStream_t>(o.stream);
  const bool ckpt = o.activation_checkpointing;
  if (o.dtype == kernels::DType::F32)
    return std::make_unique<Cuda<float>>(config, o.max_batch, o.max_seq, ckpt, stream);
  if (o.dtype == kernels::DType::BF16)
    return std::make_unique<Cuda<__nv_bfloat16>>(config, o.max_batch, o.max_seq, ckpt, stream);
  return std::make_unique<Cuda<__half>>(config, o.max_batch, o.max_seq, ckpt, stream);
}
#endif

}  // namespace dsx::models
