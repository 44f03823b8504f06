// Llama-family presets, validation, the Hugging Face parameter layout and the rotary frequencies.
#include "models/llama/config.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <numbers>

#include "dsx/error.h"
#include "models/presets.h"
#include "models/token_batch.h"

namespace dsx::models {

namespace {

LlamaConfig make(int V, int C, int F, int L, int NH, int KV, int D, int maxT) {
  LlamaConfig c;
  c.vocab_size = V, c.hidden_size = C, c.intermediate_size = F, c.num_layers = L;
  c.num_heads = NH, c.num_kv_heads = KV, c.head_dim = D, c.max_position_embeddings = maxT;
  c.rms_norm_eps = 1e-5;  // what the released Llama 2/3 checkpoints use
  c.tie_word_embeddings = false;
  return c;
}

const std::map<std::string, LlamaConfig>& presets() {
  static const std::map<std::string, LlamaConfig> table = {
      {"llama-tiny", make(256, 64, 172, 2, 4, 2, 16, 128)},
      {"llama-bench", make(32000, 512, 1376, 6, 8, 2, 64, 512)},
  };
  return table;
}

void fail(const std::string& field, const std::string& what) {
  throw Error(ErrorKind::Config, "Llama config: " + field + " " + what);
}

void validate_rope_scaling(const RopeScaling& s) {
  if (s.kind == RopeScaling::Kind::None) return;
  if (!(s.factor > 0)) fail("rope_scaling.factor", "must be positive (got " + std::to_string(s.factor) + ")");
  if (s.kind != RopeScaling::Kind::Llama3) return;
  if (!(s.low_freq_factor > 0)) fail("rope_scaling.low_freq_factor", "must be positive");
  // The smooth band divides by high - low: equal factors would divide by zero.
  if (!(s.high_freq_factor > s.low_freq_factor))
    fail("rope_scaling.high_freq_factor", "must be greater than low_freq_factor (" +
                                              std::to_string(s.low_freq_factor) + ")");
  if (s.original_max_position_embeddings < 1)
    fail("rope_scaling.original_max_position_embeddings", "must be positive");
}

}  // namespace

LlamaConfig llama_preset(const std::string& name) { return find_preset(presets(), name, "Llama"); }

std::vector<std::string> llama_preset_names() { return preset_names(presets()); }

int longest_exact_sequence(const LlamaConfig& c) {
  return c.sliding_window > 0 ? std::min(c.sliding_window, c.max_position_embeddings) : c.max_position_embeddings;
}

std::string longest_exact_sequence_reason(const LlamaConfig& c) {
  if (longest_exact_sequence(c) == c.max_position_embeddings) return "max_position_embeddings";
  return "sliding_window: dsx's full causal attention equals the window's only for sequences no longer than it";
}

const LlamaConfig& checked_for_build(const LlamaConfig& config, int max_batch, int max_seq) {
  validate(config);
  check_build_sizes("Llama", max_batch, max_seq, longest_exact_sequence(config),
                    longest_exact_sequence_reason(config).c_str());
  return config;
}

void validate(const LlamaConfig& c) {
  auto positive = [](const char* field, int v) {
    if (v < 1) fail(field, "must be positive (got " + std::to_string(v) + ")");
  };
  positive("vocab_size", c.vocab_size);
  positive("hidden_size", c.hidden_size);
  positive("intermediate_size", c.intermediate_size);
  positive("num_hidden_layers", c.num_layers);
  positive("num_attention_heads", c.num_heads);
  positive("num_key_value_heads", c.num_kv_heads);
  positive("max_position_embeddings", c.max_position_embeddings);
  if (c.sliding_window < 0) fail("sliding_window", "must be positive, or 0 for none (got " + std::to_string(c.sliding_window) + ")");
  if (c.num_heads % c.num_kv_heads != 0)
    fail("num_key_value_heads", "(" + std::to_string(c.num_kv_heads) + ") must divide num_attention_heads (" +
                                    std::to_string(c.num_heads) + ")");
  // Rotary embedding pairs channel j with j + D/2.
  if (c.head_dim < 2 || c.head_dim % 2 != 0)
    fail("head_dim", "must be even and at least 2 (got " + std::to_string(c.head_dim) + ")");
  if (!(c.rms_norm_eps > 0)) fail("rms_norm_eps", "must be positive");
  if (!(c.rope_theta > 0)) fail("rope_theta", "must be positive");
  validate_rope_scaling(c.rope_scaling);
}

std::vector<ParamSpec> llama_param_specs(const LlamaConfig& c) {
  const int64_t V = c.vocab_size, C = c.hidden_size, F = c.intermediate_size;
  const int64_t QD = int64_t(c.num_heads) * c.head_dim, KVD = int64_t(c.num_kv_heads) * c.head_dim;
  std::vector<ParamSpec> specs;
  size_t offset = 0;
  auto add = [&](std::string name, std::vector<int64_t> shape, int layer) {
    size_t numel = 1;
    for (int64_t d : shape) numel *= static_cast<size_t>(d);
    const bool decay = shape.size() == 2;  // matrices; norms and biases are 1-D
    specs.push_back({std::move(name), std::move(shape), layer, decay, offset, numel});
    offset += numel;
  };
  add("model.embed_tokens.weight", {V, C}, 0);
  for (int i = 0; i < c.num_layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    const int layer = 1 + i;
    add(p + "input_layernorm.weight", {C}, layer);
    const std::pair<const char*, int64_t> projections[] = {{"q_proj", QD}, {"k_proj", KVD}, {"v_proj", KVD}};
    for (const auto& [name, rows] : projections) {
      add(p + "self_attn." + name + ".weight", {rows, C}, layer);
      if (c.qkv_bias) add(p + "self_attn." + name + ".bias", {rows}, layer);
    }
    add(p + "self_attn.o_proj.weight", {C, QD}, layer);
    if (c.o_bias) add(p + "self_attn.o_proj.bias", {C}, layer);
    add(p + "post_attention_layernorm.weight", {C}, layer);
    add(p + "mlp.gate_proj.weight", {F, C}, layer);
    add(p + "mlp.up_proj.weight", {F, C}, layer);
    add(p + "mlp.down_proj.weight", {C, F}, layer);
  }
  add("model.norm.weight", {C}, c.num_layers + 1);
  if (!c.tie_word_embeddings) add("lm_head.weight", {V, C}, c.num_layers + 1);
  return specs;
}

std::vector<double> llama_rope_inv_freq(const LlamaConfig& c) {
  const int half = c.head_dim / 2;
  std::vector<double> inv(half);
  for (int i = 0; i < half; ++i) inv[i] = 1.0 / std::pow(c.rope_theta, 2.0 * i / c.head_dim);
  const RopeScaling& s = c.rope_scaling;
  if (s.kind == RopeScaling::Kind::Linear) {
    for (double& f : inv) f /= s.factor;  // positions / factor is the same angle
  } else if (s.kind == RopeScaling::Kind::Llama3) {
    // Llama 3.1: long wavelengths slowed by `factor`, short ones kept, a linear blend between.
    const double L0 = s.original_max_position_embeddings;
    const double low_wavelen = L0 / s.low_freq_factor, high_wavelen = L0 / s.high_freq_factor;
    for (double& f : inv) {
      const double wavelen = 2 * std::numbers::pi / f;
      if (wavelen > low_wavelen) {
        f /= s.factor;
      } else if (wavelen >= high_wavelen) {
        const double smooth = (L0 / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
        f = (1 - smooth) * f / s.factor + smooth * f;
      }
    }
  }
  return inv;
}

std::vector<double> llama_rope_angles(const LlamaConfig& c, int max_seq) {
  const std::vector<double> inv = llama_rope_inv_freq(c);
  std::vector<double> angles(static_cast<size_t>(max_seq) * inv.size());
  for (size_t t = 0; t < static_cast<size_t>(max_seq); ++t) {
    for (size_t j = 0; j < inv.size(); ++j) {
      angles[t * inv.size() + j] = static_cast<float>(static_cast<float>(t) * static_cast<float>(inv[j]));
    }
  }
  return angles;
}

}  // namespace dsx::models
