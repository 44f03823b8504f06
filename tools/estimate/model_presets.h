// Built-in model shapes for `dsx estimate --model`: the GPT-2 family and common Llama-style
// sizes, with the shapes their authors published.
#pragma once

#include <cstdint>
#include <optional>
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

// A parameter count as people write it: "7e9", "124439808", or a number with K, M, B (or G)
// or T after it, in either case ("7B", "1.3b", "500M"). nullopt unless it is a whole number
// from 1 to 9e15.
std::optional<int64_t> parse_param_count(const std::string& text);

// A preset by name, or by size: "7B", "1.3B" or "7e9" takes the shape of the preset nearest
// that size and counts exactly that many parameters. Throws dsx::Error(Usage) listing the
// known names when `name` is neither.
ModelShape find_model_preset(const std::string& name);

}  // namespace dsx::estimate
