// PEFT's merge_and_unload: each adapted weight W (out, in) becomes W + scale * B @ A, so the
// base model alone computes what base + adapters did (up to rounding), for a full export.
#pragma once

#include <vector>

#include "models/model.h"

namespace dsx::models {

// `base` in base_specs' layout (Hugging Face names "....q_proj.weight"), `adapters` in
// adapter_specs' (pairs "....q_proj.lora_A.weight", "....q_proj.lora_B.weight").
// Error(Format) naming an adapter whose weight the base lacks or whose shapes disagree.
void merge_lora_adapters(const std::vector<ParamSpec>& base_specs, float* base,
                         const std::vector<ParamSpec>& adapter_specs, const float* adapters, double scale);

}  // namespace dsx::models
