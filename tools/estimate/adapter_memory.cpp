// Module shapes follow model_shape.cpp's parameter counting, split per linear.
#include "tools/estimate/adapter_memory.h"

#include <algorithm>

#include "dsx/error.h"

namespace dsx::estimate {

const char* to_string(Method m) {
  switch (m) {
    case Method::Full:
      return "full";
    case Method::Lora:
      return "lora";
    case Method::Qlora:
      return "qlora";
  }
  return "?";
}

std::vector<LinearModule> block_linears(const ModelShape& s) {
  const int64_t h = s.hidden, i = s.intermediate;
  if (s.arch == Architecture::Gpt2) {
    return {{"c_attn", 3 * h, h}, {"c_proj", h, h}, {"c_fc", i, h}, {"mlp.c_proj", h, i}};
  }
  const int64_t kv = h / s.heads * s.kv_heads;
  return {{"q_proj", h, h},    {"k_proj", kv, h}, {"v_proj", kv, h},  {"o_proj", h, h},
          {"gate_proj", i, h}, {"up_proj", i, h}, {"down_proj", h, i}};
}

std::vector<LinearModule> lora_targets(const ModelShape& s, const AdapterOptions& options) {
  const auto all = block_linears(s);
  std::vector<LinearModule> chosen;
  std::vector<std::string> targets = options.targets;
  if (targets.empty()) {
    targets = s.arch == Architecture::Gpt2 ? std::vector<std::string>{"c_attn"}
                                           : std::vector<std::string>{"q_proj", "v_proj"};
  }
  for (const auto& target : targets) {
    if (target == "all-linear") return all;
    bool found = false;
    for (const auto& m : all) {
      if (m.name != target) continue;
      chosen.push_back(m);
      found = true;
    }
    if (!found) {
      std::string names;
      for (const auto& m : all) names += (names.empty() ? "" : ", ") + m.name;
      throw Error(ErrorKind::Usage, "LoRA target module '" + target + "' is not a linear of a " +
                                        to_string(s.arch) +
                                        " block; use all-linear or some of: " + names);
    }
  }
  return chosen;
}

int64_t lora_params(const ModelShape& s, const AdapterOptions& options) {
  int64_t per_block = 0;
  for (const auto& m : lora_targets(s, options)) per_block += options.r * (m.in + m.out);
  return s.layers * per_block;
}

int64_t nf4_weight_bytes(int64_t out, int64_t in, bool double_quant) {
  const int64_t n = out * in, blocks = (n + 63) / 64;
  const int64_t code = 16 * 4;
  if (!double_quant) return (n + 1) / 2 + 4 * blocks + code;
  const int64_t nested_blocks = (blocks + 255) / 256;
  return (n + 1) / 2 + blocks + 4 * nested_blocks + 256 * 4 + 4 + code;
}

int64_t frozen_base_bytes(const ModelShape& s, Method method, bool double_quant,
                          int64_t weight_bytes) {
  const int64_t params = parameter_count(s);
  if (method != Method::Qlora) return weight_bytes * params;
  int64_t linear_params = 0, nf4_bytes = 0;
  for (const auto& m : block_linears(s)) {
    linear_params += m.out * m.in;
    nf4_bytes += nf4_weight_bytes(m.out, m.in, double_quant);
  }
  // Biases (GPT-2) and everything outside the block linears stay in 16-bit.
  const int64_t rest =
      std::max<int64_t>(0, params - s.layers * linear_params);  // --params may undercut
  return s.layers * nf4_bytes + weight_bytes * rest;
}

}  // namespace dsx::estimate
