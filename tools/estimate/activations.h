// Activation memory of one micro-batch: what forward keeps for backward. The per-layer terms
// follow Korthikanti et al., "Reducing Activation Recomputation in Large Transformer Models"
// (2022): 34·h + 5·a·s bytes per token per layer for GPT-2 in 16-bit, generalised to grouped
// kv heads, gated MLPs and flash attention; docs/estimate.md derives each term.
#pragma once

#include <cstdint>

#include "tools/estimate/model_shape.h"

namespace dsx::estimate {

struct ActivationOptions {
  int64_t seq_len = 0;
  int64_t micro_batch = 1;
  int64_t bytes_per_value = 2;  // 2 for fp16/bf16 activations, 4 for fp32
  bool flash_attention = true;  // the s×s score matrix is never stored
  bool checkpointing = false;   // full activation checkpointing of every block
};

struct ActivationBytes {
  int64_t layers = 0;     // the transformer blocks
  int64_t embedding = 0;  // embedding output and final norm input
  int64_t logits = 0;     // the fp32 log-softmax the loss keeps
  int64_t total() const { return layers + embedding + logits; }
};

// Bytes one token leaves behind in one transformer block, without checkpointing.
int64_t block_bytes_per_token(const ModelShape& shape, const ActivationOptions& options);

ActivationBytes activation_bytes(const ModelShape& shape, const ActivationOptions& options);

}  // namespace dsx::estimate
