// make_lora_model (see lora_factory.h).
#include "models/lora/lora_factory.h"

#include "dsx/error.h"
#include "models/lora/frozen_weights.h"

namespace dsx::models {

std::unique_ptr<LoraLlama> make_lora_model(const ModelShape& shape, std::vector<float> base, const LoraConfig& lora,
                                           const ModelBuildOptions& options) {
  if (shape.family != ModelShape::Family::Llama)
    throw Error(ErrorKind::Unsupported, "LoRA trains Llama-family models (Llama, Mistral, Qwen2) so far, not " +
                                            shape.family_name() + "; fine-tune GPT-2 in full instead");
  if (options.cuda)
    throw Error(ErrorKind::Unsupported,
                "LoRA runs on the CPU so far; add --device cpu (and bf16/fp16 \"enabled\": false)");
  auto frozen = std::make_unique<DenseFrozenWeights>(llama_param_specs(shape.llama), std::move(base));
  return std::make_unique<LoraLlama>(shape.llama, lora, options.max_batch, options.max_seq,
                                     options.activation_checkpointing, std::move(frozen));
}

}  // namespace dsx::models
