// Reads a Hugging Face config.json into a ModelShape, so `dsx estimate --hf-config` answers for
// any GPT-2 or Llama-style checkpoint without downloading its weights.
#pragma once

#include <string>

#include "tools/estimate/model_shape.h"

namespace dsx::estimate {

// Understands both naming schemes: hidden_size / n_embd, num_hidden_layers / n_layer,
// num_attention_heads / n_head, num_key_value_heads, vocab_size, intermediate_size / n_inner,
// max_position_embeddings / n_positions, tie_word_embeddings. model_type "gpt2" selects the
// GPT-2 family, anything else the Llama-style one. Throws dsx::Error (Io for an unreadable
// file, Config for bad JSON or a missing or mistyped key, naming the key and the file).
ModelShape read_hf_config(const std::string& path);

// The same from JSON text; `origin` names the source in error messages.
ModelShape parse_hf_config(const std::string& json, const std::string& origin);

}  // namespace dsx::estimate
