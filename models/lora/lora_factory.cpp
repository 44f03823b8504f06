// make_lora_model (see lora_factory.h).
#include "models/lora/lora_factory.h"

#include "dsx/error.h"
#include "models/lora/frozen_weights.h"
#include "models/lora/lora_gpt2.h"

namespace dsx::models {

std::unique_ptr<LoraModel> make_lora_model(const ModelShape& shape, std::vector<float> base, const LoraConfig& lora,
                                           const ModelBuildOptions& options) {
  if (shape.family == ModelShape::Family::GPT2) {
    if (options.cuda)
      throw Error(ErrorKind::Unsupported,
                  "LoRA runs on the CPU so far; add --device cpu (and bf16/fp16 \"enabled\": false)");
    return std::make_unique<LoraGpt2>(shape.gpt2, lora, options.max_batch, options.max_seq,
                                      options.activation_checkpointing,
                                      std::make_unique<DenseFrozenWeights>(gpt2_param_specs(shape.gpt2), std::move(base)));
  }
  return make_lora_model(shape, std::make_unique<DenseFrozenWeights>(llama_param_specs(shape.llama), std::move(base)),
                         lora, options);
}

std::unique_ptr<LoraLlama> make_lora_model(const ModelShape& shape, std::unique_ptr<ParamAccess> frozen,
                                           const LoraConfig& lora, const ModelBuildOptions& options) {
  if (shape.family != ModelShape::Family::Llama)
    throw Error(ErrorKind::Unsupported, "this LoRA base (partitioned or quantised) is for the Llama family (Llama, "
                                        "Mistral, Qwen2), not " + shape.family_name() +
                                            "; GPT-2 trains LoRA over a base every rank holds whole (ZeRO 0-2, or 3 "
                                            "with its adapters partitioned)");
  if (options.cuda)
    throw Error(ErrorKind::Unsupported,
                "LoRA runs on the CPU so far; add --device cpu (and bf16/fp16 \"enabled\": false)");
  return std::make_unique<LoraLlama>(shape.llama, lora, options.max_batch, options.max_seq,
                                     options.activation_checkpointing, std::move(frozen));
}

}  // namespace dsx::models
