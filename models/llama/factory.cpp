// Llama-family construction by device and dtype (see factory.h).
#include "models/llama/factory.h"

#include <string>

#include "dsx/error.h"
#include "models/llama/llama_cpu.h"
#ifdef DSX_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "models/llama/llama_cuda.h"
#endif

namespace dsx::models {

std::unique_ptr<Model> make_llama(const LlamaConfig& config, const LlamaOptions& o) {
  const bool ckpt = o.activation_checkpointing;
  if (!o.cuda) {
    if (o.dtype != kernels::DType::F32)
      throw Error(ErrorKind::Unsupported, std::string("the CPU Llama trains in fp32, not ") +
                                              kernels::dtype_name(o.dtype) +
                                              "; set bf16/fp16 \"enabled\": false for CPU runs");
    return std::make_unique<LlamaCpu<float>>(config, o.max_batch, o.max_seq, ckpt);
  }
#ifdef DSX_HAVE_CUDA
  auto stream = static_cast<cudaStream_t>(o.stream);
  if (o.dtype == kernels::DType::F32) {
    return std::make_unique<LlamaCuda<float>>(config, o.max_batch, o.max_seq, ckpt, stream);
  }
  if (o.dtype == kernels::DType::BF16) {
    return std::make_unique<LlamaCuda<__nv_bfloat16>>(config, o.max_batch, o.max_seq, ckpt, stream);
  }
  return std::make_unique<LlamaCuda<__half>>(config, o.max_batch, o.max_seq, ckpt, stream);
#else
  throw Error(ErrorKind::Unsupported,
              "this dsx was built without CUDA, so Llama runs on the CPU only; rebuild with "
              "-DDSX_CUDA=ON on a machine with nvcc, or train without a GPU in the arrangement");
#endif
}

}  // namespace dsx::models
