// What `dsx train --lora` builds on a 4-bit base (QLoRA), as PEFT + bitsandbytes users expect:
// a folder saved with bitsandbytes 4-bit (config.json's quantization_config) trains as QLoRA
// with no flag; a bf16/fp16/fp32 Llama-family folder is quantised to NF4 at load when asked
// (--load-in-4bit, with transformers' BitsAndBytesConfig defaults: no double quantisation, fp32
// compute). The CPU path only; the GPU is refused by make_lora_model.
#pragma once

#include <memory>
#include <string>

#include "models/io/nf4_base_weights.h"
#include "models/lora/lora_llama.h"
#include "models/model_source.h"

namespace dsx::models {

// True when `model` is a bitsandbytes 4-bit folder, or load_in_4bit asks for QLoRA.
bool wants_qlora(const std::string& model, bool load_in_4bit);

// The shape and folder of a QLoRA base, without reading its weights (read_nf4_base_weights
// does, as NF4). Error(Usage) when `dir` is not a Hugging Face Llama-family folder.
ModelSource qlora_model_source(const std::string& dir);

// "bfloat16", "float16" or "float32" (bnb_4bit_compute_dtype); Error(Usage) for anything else.
kernels::DType bnb_compute_dtype(const std::string& name);

// The LoRA model over the NF4 base read from source.folder.
std::unique_ptr<LoraLlama> make_qlora_model(const ModelSource& source, const LoraConfig& lora,
                                            const Nf4LoadOptions& quantization,
                                            const ModelBuildOptions& options);

}  // namespace dsx::models
