// What `dsx train --lora` builds on a 4-bit base (QLoRA), as PEFT + bitsandbytes users expect:
// a folder saved with bitsandbytes 4-bit (config.json's quantization_config) trains as QLoRA
// with no flag; a bf16/fp16/fp32 Llama-family folder is quantised to NF4 at load when asked
// (--load-in-4bit, with transformers' BitsAndBytesConfig defaults: no double quantisation, fp32
// compute). On CPU ranks or one GPU.
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

// The name of a compute dtype as BitsAndBytesConfig writes it ("bfloat16", ...).
const char* bnb_compute_dtype_name(kernels::DType dtype);

// How a 16/32-bit folder was quantised at load, as BitsAndBytesConfig's keys (load_in_4bit,
// bnb_4bit_quant_type, bnb_4bit_use_double_quant, bnb_4bit_compute_dtype): one JSON object, what a
// QLoRA run's checkpoint records so that its export dequantises the base the adapters trained on.
std::string bnb_4bit_config_json(const Nf4LoadOptions& options);
// The reverse; Error(Format) naming `origin` for an object that is not one.
Nf4LoadOptions parse_bnb_4bit_config(const std::string& json, const std::string& origin);

// The LoRA model over the NF4 base read from source.folder, on the CPU (options.cuda refused).
std::unique_ptr<LoraLlama> make_qlora_model(const ModelSource& source, const LoraConfig& lora,
                                            const Nf4LoadOptions& quantization,
                                            const ModelBuildOptions& options);

// The same on one GPU (LoraLlamaCuda in options.dtype, on options.stream): the NF4 base held on
// the device as NF4 (nf4_device_weights.h). Error(Unsupported) in a build without CUDA, and for
// what LoRA on the GPU refuses (modules_to_save, bias).
std::unique_ptr<LoraModel> make_qlora_model_on_gpu(const ModelSource& source,
                                                   const LoraConfig& lora,
                                                   const Nf4LoadOptions& quantization,
                                                   const ModelBuildOptions& options);

}  // namespace dsx::models
