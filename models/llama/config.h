// Llama-family hyper-parameters (Llama 2/3, Mistral, Qwen2 share one decoder: RMSNorm, rotary
// positions, SwiGLU MLP, grouped-query attention) and the parameter list, named and shaped as
// Hugging Face's LlamaForCausalLM / MistralForCausalLM / Qwen2ForCausalLM state dicts, so a model
// folder's tensors map one to one onto the flat buffer.
//
// Flat-buffer order is layer by layer, so one ZeRO layer is one contiguous run:
//   layer 0       model.embed_tokens.weight                      (V, C)
//   layer 1+i     model.layers.i.input_layernorm.weight           (C)
//                 model.layers.i.self_attn.q_proj.weight          (NH*D, C)   [+ .bias (NH*D)]
//                 model.layers.i.self_attn.k_proj.weight          (KV*D, C)   [+ .bias (KV*D)]
//                 model.layers.i.self_attn.v_proj.weight          (KV*D, C)   [+ .bias (KV*D)]
//                 model.layers.i.self_attn.o_proj.weight          (C, NH*D)   [+ .bias (C)]
//                 model.layers.i.post_attention_layernorm.weight  (C)
//                 model.layers.i.mlp.gate_proj.weight             (F, C)
//                 model.layers.i.mlp.up_proj.weight               (F, C)
//                 model.layers.i.mlp.down_proj.weight             (C, F)
//   layer L+1     model.norm.weight                               (C)
//                 lm_head.weight                                  (V, C)      untied only
// Biases are present as qkv_bias / o_bias say (Qwen2: q, k, v; Llama's attention_bias: all four).
// With tied embeddings the head reads layer 0's table, which stays acquired from the embedding
// to the head in forward (and from the head back to the embedding in backward), as GPT-2's does.
#pragma once

#include <string>
#include <vector>

#include "models/model.h"

namespace dsx::models {

// rope_scaling of config.json. None: plain RoPE. Llama3: Llama 3.1's frequency-dependent
// scaling (factor, low_freq_factor, high_freq_factor, original_max_position_embeddings).
// Linear: positions divided by factor. Other kinds are refused when the config is read.
struct RopeScaling {
  enum class Kind { None, Llama3, Linear };
  Kind kind = Kind::None;
  double factor = 1.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  int original_max_position_embeddings = 8192;
};

struct LlamaConfig {
  std::string architecture = "LlamaForCausalLM";  // as config.json's "architectures" names it
  std::string model_type = "llama";               // "llama", "mistral" or "qwen2"
  int vocab_size = 32000;             // V
  int hidden_size = 4096;             // C
  int intermediate_size = 11008;      // F
  int num_layers = 32;                // L
  int num_heads = 32;                 // NH
  int num_kv_heads = 32;              // KV, divides NH (grouped-query attention when KV < NH)
  int head_dim = 128;                 // D; C / NH unless config.json says otherwise
  int max_position_embeddings = 4096;
  // Mistral's sliding_window: each position attends to at most this many (itself included); 0:
  // none. dsx's attention is full causal, which is the window's attention exactly for sequences
  // no longer than the window, so models are built for at most that many positions.
  int sliding_window = 0;
  // transformers' defaults, also what hf_config.cpp takes where config.json leaves the key out
  double rms_norm_eps = 1e-6;
  double rope_theta = 10000.0;
  RopeScaling rope_scaling;
  bool tie_word_embeddings = false;
  bool qkv_bias = false;              // Qwen2: true
  bool o_bias = false;                // Llama's attention_bias sets qkv_bias and o_bias
  int bos_token_id = -1;              // -1: none (written back to config.json as null)
  int eos_token_id = -1;
};

// Presets: "llama-tiny" (byte-level vocabulary 256, 2 layers, C 64, GQA 4/2, T 128: tests and the
// CPU demo) and "llama-bench" (vocabulary 32000, 6 layers, C 512, F 1376, GQA 8/2, T 512: the CPU
// benchmark). Throws Error(Config) naming the valid presets for an unknown name.
LlamaConfig llama_preset(const std::string& name);
std::vector<std::string> llama_preset_names();

// Throws Error(Config) naming the field when one is out of range (KV not dividing NH, odd D, ...).
void validate(const LlamaConfig& config);
// The longest sequence dsx computes exactly: max_position_embeddings, or a shorter sliding window.
int longest_exact_sequence(const LlamaConfig& config);
// What sets that length, for messages: "max_position_embeddings", or the window and why.
std::string longest_exact_sequence_reason(const LlamaConfig& config);
// validate(config), then the largest batch a model is built for (check_build_sizes): what the
// Llama models check before they build anything. Returns config.
const LlamaConfig& checked_for_build(const LlamaConfig& config, int max_batch, int max_seq);

// The ParamSpecs in flat-buffer order (above), with Hugging Face's names.
std::vector<ParamSpec> llama_param_specs(const LlamaConfig& config);

// Inverse frequencies of the rotary embedding, D/2 of them, with rope_scaling applied as
// transformers' _compute_default_rope_parameters / _compute_llama3_parameters do (in double).
std::vector<double> llama_rope_inv_freq(const LlamaConfig& config);

// The rotary angles of positions 0 .. max_seq-1, (max_seq, D/2) row-major, as transformers forms
// them: inverse frequency and position in fp32 and their product rounded to fp32 (a pretrained
// model saw these angles; at position 8000 the rounding is 5e-4 rad, beyond fp32 tolerance of the
// exact ones). The CPU and CUDA models take cos and sin of them.
std::vector<double> llama_rope_angles(const LlamaConfig& config, int max_seq);

}  // namespace dsx::models
