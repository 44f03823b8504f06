// What `dsx train --lora` and `dsx sample --lora-adapter` build: a LoRA model over the base that
// --model named, with its weights frozen and held dense. The Llama family and GPT-2 on the CPU
// only, so far: the CUDA path is refused with what to do instead.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "models/build_options.h"
#include "models/lora/lora_llama.h"
#include "models/model_source.h"

namespace dsx::models {

// `base`: the model's weights in its flat layout (moved into a dense frozen base); a LoraLlama
// or, for GPT-2, a LoraGpt2.
std::unique_ptr<LoraModel> make_lora_model(const ModelShape& shape, std::vector<float> base, const LoraConfig& lora,
                                           const ModelBuildOptions& options);
// `frozen` reads the base weights (dense, partitioned at ZeRO stage 3, or quantised).
std::unique_ptr<LoraLlama> make_lora_model(const ModelShape& shape, std::unique_ptr<ParamAccess> frozen,
                                           const LoraConfig& lora, const ModelBuildOptions& options);

}  // namespace dsx::models
