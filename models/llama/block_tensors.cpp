// Where a Llama-family block's tensors stand among its ParamSpecs (see block_tensors.h).
#include "models/llama/block_tensors.h"

#include <string>

namespace dsx::models {

LlamaBlockLayout::LlamaBlockLayout(const LlamaConfig& config, const std::vector<ParamSpec>& specs)
    : per_block_(9 + (config.qkv_bias ? 3 : 0) + (config.o_bias ? 1 : 0)),
      num_layers_(config.num_layers),
      tied_(config.tie_word_embeddings) {
  auto rel = [&](const std::string& suffix) {  // the tensor's place among block 0's specs
    for (size_t i = 0; i < per_block_; ++i)
      if (specs[1 + i].name == "model.layers.0." + suffix) return static_cast<int>(i);
    return -1;
  };
  index_ = {rel("input_layernorm.weight"), rel("self_attn.q_proj.weight"),
            rel("self_attn.q_proj.bias"),  rel("self_attn.k_proj.weight"),
            rel("self_attn.k_proj.bias"),  rel("self_attn.v_proj.weight"),
            rel("self_attn.v_proj.bias"),  rel("self_attn.o_proj.weight"),
            rel("self_attn.o_proj.bias"),  rel("post_attention_layernorm.weight"),
            rel("mlp.gate_proj.weight"),   rel("mlp.up_proj.weight"),
            rel("mlp.down_proj.weight")};
}

}  // namespace dsx::models
