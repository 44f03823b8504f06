// GPT-2 construction by device and dtype (see factory.h).
#include "models/gpt2/factory.h"

#include "dsx/error.h"
#include "models/gpt2/gpt2_cpu.h"
#ifdef DSX_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "models/gpt2/gpt2_cuda.h"
#endif

namespace dsx::models {

std::unique_ptr<Model> make_gpt2(const GPT2Config& config, const GPT2Options& o) {
  const bool ckpt = o.activation_checkpointing;
  if (!o.cuda) {
    if (o.dtype != kernels::DType::F32)
      throw Error(ErrorKind::Unsupported, std::string("the CPU GPT-2 trains in fp32, not ") +
                                              kernels::dtype_name(o.dtype) + "; set bf16/fp16 \"enabled\": false for CPU runs");
    return std::make_unique<GPT2Cpu<float>>(config, o.max_batch, o.max_seq, ckpt);
  }
#ifdef DSX_HAVE_CUDA
  auto stream = static_cast<cudaStream_t>(o.stream);
  if (o.dtype == kernels::DType::F32) {
    return std::make_unique<GPT2Cuda<float>>(config, o.max_batch, o.max_seq, ckpt, stream);
  }
  if (o.dtype == kernels::DType::BF16) {
    return std::make_unique<GPT2Cuda<__nv_bfloat16>>(config, o.max_batch, o.max_seq, ckpt, stream);
  }
  return std::make_unique<GPT2Cuda<__half>>(config, o.max_batch, o.max_seq, ckpt, stream);
#else
  throw Error(ErrorKind::Unsupported, "this dsx was built without CUDA; rebuild with -DDSX_CUDA=ON on a machine with nvcc");
#endif
}

int cuda_device_count() {
#ifdef DSX_HAVE_CUDA
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess ? count : 0;
#else
  return 0;
#endif
}

}  // namespace dsx::models
