// A PEFT adapter folder (adapter_config.json + adapter_model.safetensors), read and written with
// PEFT's tensor names: "base_model.model." + the model's own name, e.g.
// base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight (ref: PEFT save_and_load.py).
// So PeftModel.from_pretrained(base, folder) loads what dsx trained, and dsx starts from an
// adapter PEFT initialised or trained.
#pragma once

#include <string>
#include <vector>

#include "models/lora/lora_config.h"
#include "models/model.h"

namespace dsx::models {

std::string peft_tensor_name(const ParamSpec& spec);

// The adapter tensors of `folder` into `flat` (specs' layout). Error(Format) naming the file and
// tensor for a missing, extra or wrongly shaped tensor, or a dtype other than F32/BF16/F16.
void read_peft_adapter_weights(const std::string& folder, const std::vector<ParamSpec>& specs, float* flat);

// adapter_config.json and adapter_model.safetensors (F32, metadata format=pt), each atomically.
void write_peft_adapter(const std::string& folder, const LoraConfig& config, const std::string& base_model,
                        const std::vector<ParamSpec>& specs, const float* flat);

}  // namespace dsx::models
