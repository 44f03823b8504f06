// The shape of a decoder-only transformer, as far as memory estimates need it: how many
// parameters it has, its largest single module, and what one token's activations hold.
// Two families cover the presets and most Hugging Face configs: GPT-2 (learned positions,
// biases, LayerNorm, GELU MLP, dropout) and Llama-style (rotary, no biases, RMSNorm, gated MLP).
#pragma once

#include <cstdint>
#include <string>

namespace dsx::estimate {

enum class Architecture { Gpt2, Llama };

const char* to_string(Architecture arch);

struct ModelShape {
  std::string name;
  Architecture arch = Architecture::Llama;
  int64_t layers = 0;
  int64_t hidden = 0;
  int64_t heads = 0;
  int64_t kv_heads = 0;  // grouped-query attention; equal to heads for plain multi-head
  int64_t vocab = 0;
  int64_t intermediate = 0;  // MLP width (GPT-2: 4 * hidden)
  int64_t max_seq_len = 0;   // max_position_embeddings / n_positions
  bool tied_embeddings = false;
  int64_t params_override = 0;  // the user's own parameter count, when given
};

// Throws dsx::Error(Config) naming the field when the shape is impossible (zero sizes, heads
// that do not divide hidden, kv heads that do not divide heads).
void validate(const ModelShape& shape);

// Trainable parameters, shared (tied) tensors counted once, as DeepSpeed's model_to_params.
int64_t parameter_count(const ModelShape& shape);

// Parameters held directly by the largest single module (non-recursive), as DeepSpeed's
// model_to_params computes `largest_layer_params` for its ZeRO-3 estimator. Usually the
// token embedding.
int64_t largest_layer_params(const ModelShape& shape);

// Parameters of one transformer block (the unit ZeRO-3 gathers and checkpointing recomputes).
int64_t block_params(const ModelShape& shape);

}  // namespace dsx::estimate
