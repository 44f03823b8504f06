// What a checkpoint keeps about the run besides the tensors: the model's shape and the folder it
// came from (for dsx export and its tokenizer files), the seed (data order and initial weights;
// training itself draws no random numbers) and the ds_config as written.
#pragma once

#include <cstdint>
#include <string>

#include "models/model_source.h"

namespace dsx::engine {

// The description as one JSON object. A LoRA run adds its adapter_config.json (PEFT's) as "lora":
// the checkpoint's tensors are then the adapters, the base stays in source_folder. A QLoRA run that
// quantised its base at load adds how, as BitsAndBytesConfig's keys ("quantization_config").
std::string run_description(const models::ModelSource& model, uint64_t seed, const std::string& config_path,
                            const std::string& lora_adapter_config = "", const std::string& quantization_config = "");

}  // namespace dsx::engine
