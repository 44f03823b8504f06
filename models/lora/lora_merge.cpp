// merge_lora_adapters (see lora_merge.h): B @ A summed in double per element, then added once.
#include "models/lora/lora_merge.h"

#include <map>
#include <string>

#include "dsx/error.h"

namespace dsx::models {

void merge_lora_adapters(const std::vector<ParamSpec>& base_specs, float* base,
                         const std::vector<ParamSpec>& adapter_specs, const float* adapters, double scale) {
  std::map<std::string, const ParamSpec*> by_name;
  for (const auto& s : base_specs) by_name[s.name] = &s;
  const std::string suffix = ".lora_A.weight";
  for (size_t i = 0; i + 1 < adapter_specs.size(); i += 2) {
    const ParamSpec &a = adapter_specs[i], &b = adapter_specs[i + 1];
    const std::string weight = a.name.substr(0, a.name.size() - suffix.size()) + ".weight";
    const auto it = by_name.find(weight);
    if (!a.name.ends_with(suffix) || it == by_name.end() || a.shape.size() != 2 || b.shape.size() != 2 ||
        it->second->shape != std::vector<int64_t>{b.shape[0], a.shape[1]})
      throw Error(ErrorKind::Format, "LoRA merge: adapter " + a.name + " does not fit a weight of the base model");
    const int64_t r = a.shape[0], in = a.shape[1], out = b.shape[0];
    float* w = base + it->second->offset;
    const float* A = adapters + a.offset;
    const float* B = adapters + b.offset;
    for (int64_t o = 0; o < out; ++o)
      for (int64_t c = 0; c < in; ++c) {
        double d = 0;
        for (int64_t k = 0; k < r; ++k) d += static_cast<double>(B[o * r + k]) * A[k * in + c];
        w[o * in + c] += static_cast<float>(scale * d);
      }
  }
}

}  // namespace dsx::models
