// What `dsx train --lora` and `dsx sample --lora-adapter` build: a LoRA model over the base that
// --model named, with its weights frozen and held dense: the Llama family and GPT-2 on the CPU,
// and the Llama family on one GPU (a CUDA build).
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
// On the GPU (options.cuda, in options.dtype, on options.stream): the base copied to the device,
// or read through `frozen` (device memory in options.dtype: a partitioned base). Error(Unsupported)
// in a build without CUDA.
std::unique_ptr<LoraModel> make_lora_model_on_gpu(const ModelShape& shape, const std::vector<float>& base,
                                                  const LoraConfig& lora, const ModelBuildOptions& options,
                                                  std::unique_ptr<ParamAccess> frozen = nullptr);
// `frozen` reads the base weights (dense, partitioned at ZeRO stage 3, or quantised).
std::unique_ptr<LoraLlama> make_lora_model(const ModelShape& shape, std::unique_ptr<ParamAccess> frozen,
                                           const LoraConfig& lora, const ModelBuildOptions& options);

}  // namespace dsx::models
