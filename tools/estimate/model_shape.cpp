// Parameter counts of GPT-2 and Llama-style models, module by module as Hugging Face builds them.
#include "tools/estimate/model_shape.h"

#include <algorithm>

#include "dsx/error.h"

namespace dsx::estimate {

const char* to_string(Architecture arch) { return arch == Architecture::Gpt2 ? "gpt2" : "llama"; }

void validate(const ModelShape& s) {
  auto require = [&](bool ok, const std::string& what) {
    if (!ok) throw Error(ErrorKind::Config, "model '" + s.name + "': " + what);
  };
  require(s.layers > 0,
          "the number of layers must be positive (num_hidden_layers / n_layer / --layers)");
  require(s.hidden > 0, "the hidden size must be positive (hidden_size / n_embd / --hidden)");
  require(s.heads > 0,
          "the number of attention heads must be positive (num_attention_heads / --heads)");
  require(s.vocab > 0, "the vocabulary size must be positive (vocab_size / --vocab)");
  require(s.intermediate > 0,
          "the MLP width must be positive (intermediate_size / --intermediate)");
  require(s.hidden % s.heads == 0, "hidden size " + std::to_string(s.hidden) +
                                       " is not divisible by " + std::to_string(s.heads) +
                                       " heads");
  require(s.kv_heads > 0 && s.heads % s.kv_heads == 0,
          std::to_string(s.kv_heads) + " key/value heads do not divide " + std::to_string(s.heads) +
              " attention heads (num_key_value_heads / --kv-heads)");
  require(s.params_override >= 0, "--params must not be negative");
  // Far beyond any model, and small enough that every byte count below fits in 64 bits.
  require(s.layers <= (1 << 14) && s.hidden <= (1 << 20) && s.intermediate <= (1 << 22) &&
              s.vocab <= (1 << 24) && s.max_seq_len <= (1 << 24),
          "sizes beyond any real model (at most 16384 layers, hidden 2^20, MLP width 2^22, "
          "vocabulary 2^24, "
          "sequence 2^24); check the numbers");
}

namespace {

int64_t kv_width(const ModelShape& s) { return s.hidden / s.heads * s.kv_heads; }

// Each entry is one module's own parameters (weight + bias), in Hugging Face's module tree.
struct BlockModules {
  int64_t attention_in, attention_out, mlp_in, mlp_gate, mlp_out, norms;
};

BlockModules block_modules(const ModelShape& s) {
  const int64_t h = s.hidden, i = s.intermediate;
  if (s.arch == Architecture::Gpt2) {
    // c_attn (fused qkv, Conv1D with bias), c_proj, c_fc, mlp c_proj, ln_1 and ln_2.
    return {h * 3 * h + 3 * h, h * h + h, h * i + i, 0, i * h + h, 2 * 2 * h};
  }
  // q_proj, k_proj, v_proj (counted together; the largest is q_proj), o_proj, up, gate, down,
  // and two RMSNorm weights.
  return {h * h + 2 * h * kv_width(s), h * h, h * i, h * i, i * h, 2 * h};
}

}  // namespace

int64_t block_params(const ModelShape& s) {
  auto m = block_modules(s);
  return m.attention_in + m.attention_out + m.mlp_in + m.mlp_gate + m.mlp_out + m.norms;
}

int64_t parameter_count(const ModelShape& s) {
  if (s.params_override > 0) return s.params_override;
  const int64_t h = s.hidden;
  int64_t total = s.vocab * h + s.layers * block_params(s);
  if (s.arch == Architecture::Gpt2) {
    total += s.max_seq_len * h + 2 * h;  // wpe, ln_f (weight + bias)
  } else {
    total += h;  // final RMSNorm
  }
  if (!s.tied_embeddings) total += s.vocab * h;  // lm_head
  return total;
}

int64_t largest_layer_params(const ModelShape& s) {
  const int64_t h = s.hidden, i = s.intermediate;
  // A tied lm_head still holds the embedding's weight as its own parameter.
  int64_t largest = s.vocab * h;
  if (s.arch == Architecture::Gpt2) {
    largest = std::max({largest, s.max_seq_len * h, h * 3 * h + 3 * h, h * i + i, i * h + h});
  } else {
    largest = std::max({largest, h * h, h * i});
  }
  return largest;
}

}  // namespace dsx::estimate
