// Text generation from a Model: autoregressive sampling with temperature and top-k, or greedy
// decoding (temperature 0). No key/value cache: every step re-runs the forward pass over the
// last max_seq_len() tokens, which is what a correctness-first CPU model affords.
#pragma once

#include <cstdint>
#include <vector>

#include "models/model.h"

namespace dsx::models {

struct SampleOptions {
  int max_new_tokens = 64;
  float temperature = 1.0f;  // 0: always the most likely token
  int top_k = 0;             // 0: the whole vocabulary
  uint64_t seed = 0;
  std::vector<int32_t> stop_tokens;  // generation ends after any of these (none: never)
};

// Returns the generated tokens (without the prompt). The prompt must not be empty.
std::vector<int32_t> generate(Model& model, ParamAccess& access, const std::vector<int32_t>& prompt,
                              const SampleOptions& options);

}  // namespace dsx::models
