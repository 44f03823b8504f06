// See flops.h.
#include "models/llama/flops.h"

namespace dsx::models {

double llama_forward_flops(const LlamaConfig& c, int64_t B, int64_t T) {
  const double C = c.hidden_size, F = c.intermediate_size, L = c.num_layers, V = c.vocab_size;
  const double QD = double(c.num_heads) * c.head_dim, KVD = double(c.num_kv_heads) * c.head_dim;
  const double tokens = static_cast<double>(B * T);
  const double per_block = C * QD + 2 * C * KVD + QD * C + 3 * C * F;
  const double per_token_matmuls = L * 2 * per_block + 2 * C * V;
  // token t attends to t+1 positions: scores (q.k) and the weighted sum of v, D each per query head
  const double attention_per_row = L * 2 * 2 * QD * static_cast<double>(T) * static_cast<double>(T + 1) / 2;
  return tokens * per_token_matmuls + static_cast<double>(B) * attention_per_row;
}

}  // namespace dsx::models
