// Built-in model shapes for `dsx estimate --model`: the GPT-2 family and common Llama-style
// sizes, with the shapes their authors published.
#pragma once

#include <span>
#include <string>

#include "tools/estimate/model_shape.h"

namespace dsx::estimate {

struct ModelPreset {
  const char* name;
  const char* description;
  ModelShape shape;
};

std::span<const ModelPreset> model_presets();

// Throws dsx::Error(Usage) listing the known names when `name` is not one of them.
ModelShape find_model_preset(const std::string& name);

}  // namespace dsx::estimate
