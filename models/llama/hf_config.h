// Hugging Face config.json for the Llama family (LlamaForCausalLM, MistralForCausalLM,
// Qwen2ForCausalLM), both ways. Reading accepts what transformers 4.x writes (top-level
// rope_theta, rope_scaling, torch_dtype) and what 5.x writes (rope_parameters, dtype); writing
// produces the 4.x spelling, which both generations load without conversion.
//
// Refusals name the file and the key: a value of the wrong type or out of range is
// Error(Config); a well-formed setting dsx cannot compute exactly (another architecture, a
// rope_type other than default/llama3/linear, mlp_bias, an activation other than silu, Qwen2's
// use_sliding_window with a window shorter than max_position_embeddings, attention dropout) is
// Error(Unsupported). Mistral's sliding_window is kept: models are built for sequences no longer
// than it (longest_exact_sequence), where full causal attention is the window's exactly.
#pragma once

#include <string>

#include "models/llama/config.h"

namespace dsx::models {

struct LlamaHfConfig {
  LlamaConfig config;
  std::string torch_dtype;  // "float32", "bfloat16", "float16", ... as written; "" when absent
};

// `path` only names the file in messages. The result has passed validate().
LlamaHfConfig parse_llama_hf_config(const std::string& json_text, const std::string& path);
// Reads the file (Error(Io) when it cannot be read), then parses it.
LlamaHfConfig read_llama_hf_config(const std::string& path);

// True for the architectures (and model types) above.
bool is_llama_family_architecture(const std::string& architecture);
bool is_llama_family_model_type(const std::string& model_type);

// config.json text for `config` (torch_dtype "float32", "bfloat16" or "float16"). Throws
// Error(Unsupported) for a bias combination the model type cannot express (Qwen2: q/k/v bias
// and no o bias; Mistral: none; Llama: all four or none).
std::string llama_hf_config_json(const LlamaConfig& config, const std::string& torch_dtype);

}  // namespace dsx::models
