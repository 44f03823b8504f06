// GPT-2 hyper-parameters, the named presets, and the parameter list in llm.c's checkpoint order
// (16 tensors, each stacked over layers), split into one ParamSpec per layer so ZeRO can gather
// and reduce a layer at a time. Layer 0 holds the embeddings (wte, wpe), layers 1..L the blocks,
// layer L+1 the final LayerNorm; the output head is tied to wte.
#pragma once

#include <string>
#include <vector>

#include "models/model.h"

namespace dsx::models {

struct GPT2Config {
  int max_seq_len = 1024;         // maxT: rows of the position embedding
  int vocab_size = 50257;         // V: real tokens
  int padded_vocab_size = 50304;  // Vp: V rounded up to a multiple of 128 (llm.c); extra rows are 0
  int num_layers = 12;            // L
  int num_heads = 12;             // NH
  int channels = 768;             // C, a multiple of num_heads
};

// Rounds a vocabulary up to a multiple of 128 as llm.c does (50257 -> 50304, 256 -> 256).
int padded_vocab(int vocab_size);
// A config of these sizes with the vocabulary padded as llm.c pads it.
GPT2Config gpt2_config(int max_seq_len, int vocab_size, int num_layers, int num_heads, int channels);

// Presets: "gpt2-124M", "gpt2-350M", "gpt2-774M", "gpt2-1558M" (OpenAI's sizes, GPT-2 vocab),
// "gpt2-bench" (6 layers, 384 channels, 6 heads, GPT-2 vocab, T 256: the CPU benchmark),
// "byte-tiny" (byte-level, vocab 256, 2 layers, 64 channels, T 64: learns the addition task in
// about a minute on one CPU core) and "byte-small" (byte-level, 4 layers, 128 channels, T 256).
// Throws Error(Config) naming the valid presets for an unknown name.
GPT2Config gpt2_preset(const std::string& name);
std::vector<std::string> gpt2_preset_names();

// Throws Error(Config) when a field is out of range or channels % heads != 0.
void validate(const GPT2Config& config);
// validate(config), then the largest batch a model is built for (check_build_sizes): what the
// GPT-2 models check before they build anything. Returns config.
const GPT2Config& checked_for_build(const GPT2Config& config, int max_batch, int max_seq);

// Tensors in llm.c order; index k of this enum is tensor k of the checkpoint body.
enum GPT2Tensor {
  kWte, kWpe, kLn1w, kLn1b, kQkvw, kQkvb, kAttprojw, kAttprojb,
  kLn2w, kLn2b, kFcw, kFcb, kFcprojw, kFcprojb, kLnfw, kLnfb, kNumGPT2Tensors
};

// Shape of one layer's slice of tensor k (the whole tensor for wte, wpe, lnfw, lnfb).
std::vector<int64_t> gpt2_tensor_shape(const GPT2Config& config, GPT2Tensor k);
// Elements of tensor k over all layers, as stored in the checkpoint.
size_t gpt2_tensor_numel(const GPT2Config& config, GPT2Tensor k);
bool gpt2_tensor_per_layer(GPT2Tensor k);

// The ParamSpecs, in flat-buffer order: tensor by tensor, within a tensor layer by layer.
std::vector<ParamSpec> gpt2_param_specs(const GPT2Config& config);

// Index into gpt2_param_specs() of tensor k's slice for block `block` (0-based; ignored for the
// four whole tensors).
size_t gpt2_param_index(const GPT2Config& config, GPT2Tensor k, int block);

}  // namespace dsx::models
