// Llama-family construction by device and dtype (see factory.h).
#include "models/llama/factory.h"

#include <string>

#include "dsx/error.h"
#include "models/llama/llama_cpu.h"

namespace dsx::models {

std::unique_ptr<Model> make_llama(const LlamaConfig& config, const LlamaOptions& o) {
  if (o.cuda)
    throw Error(ErrorKind::Unsupported, "Llama on CUDA is not built yet; run it on the CPU (no GPU in the arrangement)");
  if (o.dtype != kernels::DType::F32)
    throw Error(ErrorKind::Unsupported, std::string("the CPU Llama trains in fp32, not ") +
                                            kernels::dtype_name(o.dtype) + "; set bf16/fp16 \"enabled\": false for CPU runs");
  return std::make_unique<LlamaCpu<float>>(config, o.max_batch, o.max_seq, o.activation_checkpointing);
}

}  // namespace dsx::models
