// make_lora_model (see lora_factory.h).
#include "models/lora/lora_factory.h"

#include "dsx/error.h"
#include "models/lora/frozen_weights.h"

namespace dsx::models {

std::unique_ptr<LoraLlama> make_lora_model(const ModelShape& shape, std::vector<float> base, const LoraConfig& lora,
                                           const ModelBuildOptions& options) {
  if (shape.family != ModelShape::Family::Llama) return make_lora_model(shape, nullptr, lora, options);  // refused
  return make_lora_model(shape, std::make_unique<DenseFrozenWeights>(llama_param_specs(shape.llama), std::move(base)),
                         lora, options);
}

std::unique_ptr<LoraLlama> make_lora_model(const ModelShape& shape, std::unique_ptr<ParamAccess> frozen,
                                           const LoraConfig& lora, const ModelBuildOptions& options) {
  if (shape.family != ModelShape::Family::Llama)
    throw Error(ErrorKind::Unsupported, "LoRA trains Llama-family models (Llama, Mistral, Qwen2) so far, not " +
                                            shape.family_name() + "; fine-tune GPT-2 in full instead");
  if (options.cuda)
    throw Error(ErrorKind::Unsupported,
                "LoRA runs on the CPU so far; add --device cpu (and bf16/fp16 \"enabled\": false)");
  return std::make_unique<LoraLlama>(shape.llama, lora, options.max_batch, options.max_seq,
                                     options.activation_checkpointing, std::move(frozen));
}

}  // namespace dsx::models
