// The preset table. tools/compat/estimate_compat.py builds the same shapes with Hugging Face's
// classes and checks the parameter counts (docs/estimate.md).
#include "tools/estimate/model_presets.h"

#include <array>
#include <cctype>
#include <cmath>
#include <string>
#include <utility>

#include "dsx/error.h"

namespace dsx::estimate {

namespace {

ModelShape gpt2(const char* name, int64_t layers, int64_t hidden, int64_t heads) {
  return {name, Architecture::Gpt2, layers, hidden, heads, heads, 50257, 4 * hidden, 1024, true, 0};
}

ModelShape llama(const char* name, int64_t layers, int64_t hidden, int64_t heads, int64_t kv_heads,
                 int64_t vocab, int64_t intermediate, int64_t seq) {
  return {name,  Architecture::Llama, layers, hidden, heads, kv_heads,
          vocab, intermediate,        seq,    false,  0};
}

}  // namespace

std::span<const ModelPreset> model_presets() {
  static const std::array presets = {
      ModelPreset{"gpt2", "GPT-2 124M", gpt2("gpt2", 12, 768, 12)},
      ModelPreset{"gpt2-medium", "GPT-2 350M", gpt2("gpt2-medium", 24, 1024, 16)},
      ModelPreset{"gpt2-large", "GPT-2 774M", gpt2("gpt2-large", 36, 1280, 20)},
      ModelPreset{"gpt2-xl", "GPT-2 1558M", gpt2("gpt2-xl", 48, 1600, 25)},
      ModelPreset{"llama2-7b", "Llama 2 7B shape",
                  llama("llama2-7b", 32, 4096, 32, 32, 32000, 11008, 4096)},
      ModelPreset{"llama2-13b", "Llama 2 13B shape",
                  llama("llama2-13b", 40, 5120, 40, 40, 32000, 13824, 4096)},
      ModelPreset{"llama2-70b", "Llama 2 70B shape (grouped-query attention, 8 kv heads)",
                  llama("llama2-70b", 80, 8192, 64, 8, 32000, 28672, 4096)},
      ModelPreset{"llama3-8b", "Llama 3 8B shape (128K vocabulary, 8 kv heads)",
                  llama("llama3-8b", 32, 4096, 32, 8, 128256, 14336, 8192)},
  };
  return presets;
}

namespace {

// A name as people write it: lower case, without '-', '_', '.' or spaces ("Llama-2_7B" and
// "llama2-7b" are one name).
std::string folded(const std::string& name) {
  std::string out;
  for (char c : name) {
    if (c == '-' || c == '_' || c == '.' || c == ' ') continue;
    out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  return out;
}

// Other names of the presets: dsx train's GPT-2 presets (gpt2-124M, ...) and the common
// "llama-7b" for the Llama 2 shapes.
constexpr std::array<std::pair<const char*, const char*>, 7> kAliases = {{
    {"gpt2124m", "gpt2"},
    {"gpt2350m", "gpt2-medium"},
    {"gpt2774m", "gpt2-large"},
    {"gpt21558m", "gpt2-xl"},
    {"llama7b", "llama2-7b"},
    {"llama13b", "llama2-13b"},
    {"llama70b", "llama2-70b"},
}};

// The preset whose own count is nearest `params`, by ratio: 1.3B takes gpt2-xl's shape.
const ModelPreset& nearest_preset(int64_t params) {
  const ModelPreset* best = nullptr;
  double best_distance = 0;
  for (const auto& p : model_presets()) {
    double distance = std::fabs(std::log(static_cast<double>(parameter_count(p.shape)) /
                                         static_cast<double>(params)));
    if (!best || distance < best_distance) {
      best = &p;
      best_distance = distance;
    }
  }
  return *best;
}

}  // namespace

std::optional<int64_t> parse_param_count(const std::string& text) {
  if (text.empty() || !std::isdigit(static_cast<unsigned char>(text[0]))) return std::nullopt;
  std::string number = text;
  double scale = 1;
  switch (std::tolower(static_cast<unsigned char>(text.back()))) {
    case 'k': scale = 1e3; break;
    case 'm': scale = 1e6; break;
    case 'b':
    case 'g': scale = 1e9; break;
    case 't': scale = 1e12; break;
    default: break;
  }
  if (scale != 1) number.pop_back();
  size_t used = 0;
  double value = 0;
  try {
    value = std::stod(number, &used);
  } catch (const std::exception&) {
    return std::nullopt;
  }
  if (used != number.size()) return std::nullopt;
  value *= scale;
  const double whole = std::round(value);
  if (!(whole >= 1) || whole > 9e15 || std::fabs(value - whole) > 1e-6 * whole) return std::nullopt;
  return static_cast<int64_t>(whole);
}

ModelShape find_model_preset(const std::string& written) {
  std::string name = written;
  for (const auto& [alias, preset] : kAliases) {
    if (folded(written) == alias) name = preset;
  }
  std::string known;
  for (const auto& p : model_presets()) {
    if (name == p.name || folded(name) == folded(p.name)) return p.shape;
    known += known.empty() ? "" : ", ";
    known += p.name;
  }
  if (auto params = parse_param_count(written)) {
    const auto& like = nearest_preset(*params);
    ModelShape shape = like.shape;
    shape.name = written + " (shape of " + like.name + ")";
    shape.params_override = *params;
    return shape;
  }
  throw Error(ErrorKind::Usage, "unknown model preset '" + written + "'; known presets: " + known +
                                    ", or a size such as 7B or 1.3e9 (or give --hf-config "
                                    "config.json, or the shape with --layers --hidden --heads "
                                    "--vocab)");
}

}  // namespace dsx::estimate
