// Builds a Llama-family model for a device and element type, so the engine can pick it from the
// ds_config without naming the model classes (as models/gpt2/factory.h does for GPT-2).
#pragma once

#include <memory>

#include "kernels/dtype.h"
#include "models/build_options.h"
#include "models/llama/config.h"
#include "models/model.h"

namespace dsx::models {

using LlamaOptions = ModelBuildOptions;

// CPU: LlamaCpu<float>; CUDA: LlamaCuda<float, bf16 or fp16> (models/llama/llama_cuda.h). Throws
// Error(Unsupported) for a combination this build cannot run (CUDA without a CUDA build, a 16-bit
// CPU model) and Error(Config) for an invalid config.
std::unique_ptr<Model> make_llama(const LlamaConfig& config, const LlamaOptions& options);

}  // namespace dsx::models
