// Term by term (w = bytes per value, h hidden, I MLP width, a heads, s sequence):
//   norms       2 inputs                               2·w·h
//   attention   qkv input, q, k, v, projection input   w·(3h + 2·h_kv)
//   core        flash: fp32 log-sum-exp per head       4·a
//               eager: softmax output (w·a·s), dropout mask (a·s), dropout output (w·a·s)
//   mlp         input; activation in and out           w·h + 2·w·I   (gated: gate, up, act, product
//   4·w·I) dropout     1-byte masks after attention and MLP   2·h           (GPT-2 only)
// GPT-2, w = 2, I = 4h, eager: 34·h + 5·a·s, Korthikanti's figure. Outside the blocks: the
// embedding output and final norm input, and the fp32 log-softmax over the vocabulary that the
// loss saves (4·V per token, what PyTorch keeps; docs/estimate.md has the measurement).
#include "tools/estimate/activations.h"

namespace dsx::estimate {

int64_t block_bytes_per_token(const ModelShape& s, const ActivationOptions& o) {
  const int64_t w = o.bytes_per_value, h = s.hidden, a = s.heads;
  const int64_t h_kv = h / a * s.kv_heads;
  const bool dropout = s.arch == Architecture::Gpt2;
  const bool gated = s.arch == Architecture::Llama;
  int64_t bytes = 2 * w * h;                              // norm inputs
  bytes += w * (3 * h + 2 * h_kv);                        // attention
  bytes += w * h + (gated ? 4 : 2) * w * s.intermediate;  // MLP
  if (dropout) bytes += 2 * h;
  if (o.flash_attention) {
    bytes += 4 * a;
  } else {
    bytes += w * a * o.seq_len + (dropout ? a * o.seq_len + w * a * o.seq_len : 0);
  }
  return bytes;
}

ActivationBytes activation_bytes(const ModelShape& s, const ActivationOptions& o) {
  const int64_t tokens = o.seq_len * o.micro_batch;
  const int64_t w = o.bytes_per_value;
  const int64_t block = block_bytes_per_token(s, o);
  ActivationBytes bytes;
  // Checkpointing keeps each block's input and recomputes one block at a time in backward.
  bytes.layers =
      o.checkpointing ? tokens * (s.layers * w * s.hidden + block) : tokens * s.layers * block;
  bytes.embedding = tokens * (2 * w * s.hidden + (s.arch == Architecture::Gpt2 ? s.hidden : 0));
  bytes.logits = tokens * s.vocab * 4;  // the fp32 log-softmax cross-entropy keeps for backward
  return bytes;
}

}  // namespace dsx::estimate
