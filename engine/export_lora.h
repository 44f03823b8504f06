// `dsx export` of a LoRA run's checkpoint (its run description has "lora"): the adapters as a
// PEFT adapter folder that PeftModel.from_pretrained loads, or merged into the base model that
// the run started from (its source_folder) as a Hugging Face folder.
#pragma once

#include <string>

#include "kernels/dtype.h"

namespace dsx::engine {

// Whether the checkpoint (tag "" = latest) was written by a LoRA run.
bool is_lora_checkpoint(const std::string& checkpoint_dir, const std::string& tag);

// adapter_config.json + adapter_model.safetensors into out_dir. Returns the tag exported.
std::string export_lora_adapter(const std::string& checkpoint_dir, const std::string& tag, const std::string& out_dir);

// The base with W + scale * B @ A in every adapted weight, as write_hf_weights writes it.
std::string export_lora_merged(const std::string& checkpoint_dir, const std::string& tag, const std::string& out_path,
                               kernels::DType dtype);

}  // namespace dsx::engine
