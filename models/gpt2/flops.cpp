// See flops.h.
#include "models/gpt2/flops.h"

namespace dsx::models {

double gpt2_forward_flops(const GPT2Config& c, int64_t B, int64_t T) {
  const double C = c.channels, L = c.num_layers, Vp = c.padded_vocab_size;
  const double tokens = static_cast<double>(B * T);
  const double per_token_matmuls = L * 2 * (3 * C * C + C * C + 4 * C * C + 4 * C * C) + 2 * C * Vp;
  // token t attends to t+1 positions: scores (q.k) and the weighted sum of v, C each
  const double attention_per_row = L * 2 * 2 * C * static_cast<double>(T) * static_cast<double>(T + 1) / 2;
  return tokens * per_token_matmuls + static_cast<double>(B) * attention_per_row;
}

}  // namespace dsx::models
