// The Llama-family CPU model as a whole: the parameter layout (Hugging Face names, layers, decay),
// presets and validation, the rotary frequencies with rope_scaling, the logits against a plain
// float64 reference written here, float64 finite differences of every parameter's gradient (GQA
// and MHA, tied and untied, biases, llama3 scaling), float vs float64, ignored targets, gradient
// accumulation, activation checkpointing, the layer protocol, and training lowering the loss.
#include <cblas.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <numbers>
#include <random>
#include <string>
#include <vector>

#include "dsx/error.h"
#include "models/llama/factory.h"
#include "models/llama/llama_cpu.h"
#include "models/local_params.h"
#include "tests/models/cpu_model_checks.h"
#include "tests/models/plain_adamw.h"
#include "tests/models/protocol_checker.h"
#include "tests/models/random_model.h"

using namespace dsx::models;
using namespace dsx::test;

namespace {

// Small enough for finite differences; head_dim * heads (16) differs from hidden_size (12) so a
// mix-up of the two cannot pass.
LlamaConfig micro_config() {
  LlamaConfig c;
  c.vocab_size = 37, c.hidden_size = 12, c.intermediate_size = 20, c.num_layers = 2;
  c.num_heads = 4, c.num_kv_heads = 2, c.head_dim = 4, c.max_position_embeddings = 8;
  c.rms_norm_eps = 1e-5, c.rope_theta = 100.0;  // a small theta turns every frequency at T <= 8
  return c;
}

// ---- a plain float64 Llama, one token at a time, written from the transformers description ----

class ReferenceLlama {
 public:
  ReferenceLlama(const LlamaConfig& c, const std::vector<ParamSpec>& specs, const double* flat) : c_(c) {
    for (const auto& s : specs) w_[s.name] = flat + s.offset;
  }
  // Logits (B, T, V) of rows of T tokens.
  std::vector<double> logits(const std::vector<int32_t>& x, int B, int T) const {
    std::vector<double> out;
    for (int b = 0; b < B; ++b) {
      auto z = row_logits(std::vector<int32_t>(x.begin() + b * T, x.begin() + (b + 1) * T));
      out.insert(out.end(), z.begin(), z.end());
    }
    return out;
  }

 private:
  using Vec = std::vector<double>;
  const double* w(const std::string& name) const {
    auto it = w_.find(name);
    return it == w_.end() ? nullptr : it->second;
  }
  static Vec matvec(const double* W, const double* bias, int rows, const Vec& x) {
    Vec y(rows);
    for (int r = 0; r < rows; ++r) {
      double s = bias ? bias[r] : 0;
      for (size_t i = 0; i < x.size(); ++i) s += W[r * x.size() + i] * x[i];
      y[r] = s;
    }
    return y;
  }
  Vec rmsnorm(const Vec& x, const double* weight) const {
    double ms = 0;
    for (double v : x) ms += v * v / x.size();
    Vec y(x.size());
    for (size_t i = 0; i < x.size(); ++i) y[i] = weight[i] * x[i] / std::sqrt(ms + c_.rms_norm_eps);
    return y;
  }
  // q * cat(cos, cos) + rotate_half(q) * cat(sin, sin) on every head of `v`, at transformers'
  // fp32 angles (fp32 inverse frequency times fp32 position, rounded to fp32).
  Vec rope(const Vec& v, int t) const {
    const int D = c_.head_dim, h = D / 2;
    auto inv = llama_rope_inv_freq(c_);
    Vec out(v.size());
    for (size_t head = 0; head < v.size() / D; ++head)
      for (int j = 0; j < D; ++j) {
        const double a = static_cast<float>(static_cast<float>(t) * static_cast<float>(inv[j % h]));
        const double x = v[head * D + j], rot = j < h ? -v[head * D + j + h] : v[head * D + j - h];
        out[head * D + j] = x * std::cos(a) + rot * std::sin(a);
      }
    return out;
  }
  Vec attention(const std::vector<Vec>& q, const std::vector<Vec>& k, const std::vector<Vec>& v, int t) const {
    const int D = c_.head_dim, rep = c_.num_heads / c_.num_kv_heads;
    Vec out(size_t(c_.num_heads) * D, 0.0);
    for (int h = 0; h < c_.num_heads; ++h) {
      const int g = h / rep;  // repeat_kv: consecutive query heads share a kv head
      Vec s(t + 1);
      double mx = -1e300, sum = 0;
      for (int u = 0; u <= t; ++u) {
        double d = 0;
        for (int j = 0; j < D; ++j) d += q[t][h * D + j] * k[u][g * D + j];
        s[u] = d / std::sqrt(double(D));
        mx = std::max(mx, s[u]);
      }
      for (double& e : s) sum += e = std::exp(e - mx);
      for (int u = 0; u <= t; ++u)
        for (int j = 0; j < D; ++j) out[h * D + j] += s[u] / sum * v[u][g * D + j];
    }
    return out;
  }
  void block(std::vector<Vec>& hs, int i) const {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    const int T = static_cast<int>(hs.size()), C = c_.hidden_size, F = c_.intermediate_size;
    const int QD = c_.num_heads * c_.head_dim, KVD = c_.num_kv_heads * c_.head_dim;
    std::vector<Vec> q(T), k(T), v(T);
    for (int t = 0; t < T; ++t) {
      Vec xn = rmsnorm(hs[t], w(p + "input_layernorm.weight"));
      q[t] = rope(matvec(w(p + "self_attn.q_proj.weight"), w(p + "self_attn.q_proj.bias"), QD, xn), t);
      k[t] = rope(matvec(w(p + "self_attn.k_proj.weight"), w(p + "self_attn.k_proj.bias"), KVD, xn), t);
      v[t] = matvec(w(p + "self_attn.v_proj.weight"), w(p + "self_attn.v_proj.bias"), KVD, xn);
    }
    for (int t = 0; t < T; ++t) {
      Vec o = matvec(w(p + "self_attn.o_proj.weight"), w(p + "self_attn.o_proj.bias"), C, attention(q, k, v, t));
      for (int i2 = 0; i2 < C; ++i2) hs[t][i2] += o[i2];
      Vec xn = rmsnorm(hs[t], w(p + "post_attention_layernorm.weight"));
      Vec g = matvec(w(p + "mlp.gate_proj.weight"), nullptr, F, xn), u = matvec(w(p + "mlp.up_proj.weight"), nullptr, F, xn);
      for (int j = 0; j < F; ++j) g[j] = g[j] / (1 + std::exp(-g[j])) * u[j];
      Vec d = matvec(w(p + "mlp.down_proj.weight"), nullptr, C, g);
      for (int i2 = 0; i2 < C; ++i2) hs[t][i2] += d[i2];
    }
  }
  Vec row_logits(const std::vector<int32_t>& x) const {
    const int C = c_.hidden_size;
    std::vector<Vec> hs;
    for (int32_t tok : x) hs.emplace_back(w("model.embed_tokens.weight") + tok * C, w("model.embed_tokens.weight") + (tok + 1) * C);
    for (int i = 0; i < c_.num_layers; ++i) block(hs, i);
    const double* head = c_.tie_word_embeddings ? w("model.embed_tokens.weight") : w("lm_head.weight");
    Vec out;
    for (const auto& h : hs) {
      Vec z = matvec(head, nullptr, c_.vocab_size, rmsnorm(h, w("model.norm.weight")));
      out.insert(out.end(), z.begin(), z.end());
    }
    return out;
  }

  LlamaConfig c_;
  std::map<std::string, const double*> w_;
};

// Mean cross-entropy over counted targets, from logits.
double reference_loss(const std::vector<double>& z, const std::vector<int32_t>& y, int V) {
  double sum = 0;
  int counted = 0;
  for (size_t r = 0; r < y.size(); ++r) {
    if (y[r] < 0) continue;
    double mx = -1e300, se = 0;
    for (int i = 0; i < V; ++i) mx = std::max(mx, z[r * V + i]);
    for (int i = 0; i < V; ++i) se += std::exp(z[r * V + i] - mx);
    sum += mx + std::log(se) - z[r * V + y[r]];
    ++counted;
  }
  return counted ? sum / counted : 0.0;
}

}  // namespace

TEST(LlamaModel, ParamLayoutMatchesHuggingFace) {
  auto c = micro_config();
  c.qkv_bias = true, c.o_bias = true;
  auto specs = llama_param_specs(c);
  ASSERT_EQ(specs.size(), 1u + 2u * 13u + 2u);
  EXPECT_EQ(specs[0].name, "model.embed_tokens.weight");
  EXPECT_EQ(specs[0].shape, (std::vector<int64_t>{37, 12}));
  const char* block1[] = {"input_layernorm.weight", "self_attn.q_proj.weight", "self_attn.q_proj.bias",
                          "self_attn.k_proj.weight", "self_attn.k_proj.bias", "self_attn.v_proj.weight",
                          "self_attn.v_proj.bias", "self_attn.o_proj.weight", "self_attn.o_proj.bias",
                          "post_attention_layernorm.weight", "mlp.gate_proj.weight", "mlp.up_proj.weight",
                          "mlp.down_proj.weight"};
  const std::vector<int64_t> shapes[] = {{12}, {16, 12}, {16}, {8, 12}, {8}, {8, 12}, {8}, {12, 16}, {12},
                                         {12}, {20, 12}, {20, 12}, {12, 20}};
  size_t offset = 0;
  for (size_t i = 0; i < specs.size(); ++i) {
    EXPECT_EQ(specs[i].offset, offset) << specs[i].name;  // contiguous, in order
    offset += specs[i].numel;
    EXPECT_EQ(specs[i].decay, specs[i].shape.size() == 2) << specs[i].name;
  }
  for (int k = 0; k < 13; ++k) {
    const auto& s = specs[1 + 13 + k];
    EXPECT_EQ(s.name, std::string("model.layers.1.") + block1[k]);
    EXPECT_EQ(s.shape, shapes[k]) << s.name;
    EXPECT_EQ(s.layer, 2) << s.name;
  }
  EXPECT_EQ(specs[27].name, "model.norm.weight");
  EXPECT_EQ(specs[28].name, "lm_head.weight");
  EXPECT_EQ(specs[28].layer, 3);
  EXPECT_FALSE(specs[27].decay);
  // Tied and bias-free: no lm_head, no biases, 9 tensors a block.
  auto tied = micro_config();
  tied.tie_word_embeddings = true;
  auto ts = llama_param_specs(tied);
  EXPECT_EQ(ts.size(), 1u + 2u * 9u + 1u);
  EXPECT_EQ(ts.back().name, "model.norm.weight");
  LlamaCpu<float> model(tied, 1, 8);
  EXPECT_EQ(model.num_layers(), 4);
  EXPECT_EQ(model.num_params(), ts.back().offset + ts.back().numel);
}

TEST(LlamaModel, PresetsAndValidation) {
  auto tiny = llama_preset("llama-tiny");
  EXPECT_EQ(tiny.vocab_size, 256);
  EXPECT_EQ(tiny.hidden_size, 64);
  EXPECT_EQ(tiny.num_heads, 4);
  EXPECT_EQ(tiny.num_kv_heads, 2);
  EXPECT_EQ(tiny.head_dim, 16);
  EXPECT_EQ(tiny.max_position_embeddings, 128);
  EXPECT_FALSE(tiny.tie_word_embeddings);
  auto bench = llama_preset("llama-bench");
  EXPECT_EQ(bench.vocab_size, 32000);
  EXPECT_EQ(bench.num_layers, 6);
  EXPECT_EQ(bench.intermediate_size, 1376);
  EXPECT_EQ(bench.num_kv_heads, 2);
  EXPECT_EQ(bench.head_dim, 64);
  EXPECT_EQ(bench.max_position_embeddings, 512);
  EXPECT_EQ(llama_preset_names(), (std::vector<std::string>{"llama-bench", "llama-tiny"}));
  for (const auto& n : llama_preset_names()) EXPECT_NO_THROW(validate(llama_preset(n))) << n;
  try {
    llama_preset("llama-7b");
    FAIL() << "unknown preset accepted";
  } catch (const dsx::Error& e) {
    EXPECT_EQ(e.kind(), dsx::ErrorKind::Config);
    EXPECT_NE(std::string(e.what()).find("llama-tiny"), std::string::npos) << e.what();
  }
  auto expect_invalid = [](LlamaConfig c, const std::string& field) {
    try {
      validate(c);
      FAIL() << field << " accepted";
    } catch (const dsx::Error& e) {
      EXPECT_EQ(e.kind(), dsx::ErrorKind::Config);
      EXPECT_NE(std::string(e.what()).find(field), std::string::npos) << e.what();
    }
  };
  auto c = micro_config();
  c.num_kv_heads = 3;
  expect_invalid(c, "num_key_value_heads");
  c = micro_config(), c.head_dim = 5;
  expect_invalid(c, "head_dim");
  c = micro_config(), c.rms_norm_eps = 0;
  expect_invalid(c, "rms_norm_eps");
  c = micro_config(), c.rope_scaling.kind = RopeScaling::Kind::Llama3, c.rope_scaling.high_freq_factor = 1.0;
  expect_invalid(c, "high_freq_factor");
  c = micro_config(), c.rope_scaling.kind = RopeScaling::Kind::Linear, c.rope_scaling.factor = 0;
  expect_invalid(c, "rope_scaling.factor");
  EXPECT_THROW(LlamaCpu<float>(micro_config(), 1, 9), dsx::Error);  // beyond max_position_embeddings
}

TEST(LlamaModel, RopeFrequenciesWithScaling) {
  LlamaConfig c;
  c.head_dim = 128, c.rope_theta = 500000.0;
  auto plain = llama_rope_inv_freq(c);
  ASSERT_EQ(plain.size(), 64u);
  EXPECT_EQ(plain[0], 1.0);
  EXPECT_NEAR(plain[10], std::pow(500000.0, -20.0 / 128), 1e-17);
  EXPECT_NEAR(plain[63], std::pow(500000.0, -126.0 / 128), 1e-20);
  c.rope_scaling = {RopeScaling::Kind::Linear, 4.0};
  auto linear = llama_rope_inv_freq(c);
  for (int i = 0; i < 64; ++i) EXPECT_DOUBLE_EQ(linear[i], plain[i] / 4);
  // Llama 3.1: factor 8, low 1, high 4, original context 8192. Wavelengths below 2048 keep their
  // frequency, above 8192 are slowed 8x, and the band between blends linearly in 8192 / wavelength.
  c.rope_scaling = {RopeScaling::Kind::Llama3, 8.0, 1.0, 4.0, 8192};
  auto l3 = llama_rope_inv_freq(c);
  int kept = 0, slowed = 0, blended = 0;
  for (int i = 0; i < 64; ++i) {
    const double wavelen = 2 * std::numbers::pi / plain[i];
    if (wavelen < 2048) {
      EXPECT_EQ(l3[i], plain[i]) << i;
      ++kept;
    } else if (wavelen > 8192) {
      EXPECT_DOUBLE_EQ(l3[i], plain[i] / 8) << i;
      ++slowed;
    } else {
      const double s = (8192 / wavelen - 1) / 3;
      EXPECT_NEAR(l3[i], plain[i] * (s + (1 - s) / 8), 1e-15 * plain[i]) << i;
      EXPECT_LT(l3[i], plain[i]);
      EXPECT_GT(l3[i], plain[i] / 8);
      ++blended;
    }
  }
  // Llama 3.1 8B's frequencies reach all three bands.
  EXPECT_GT(kept, 0);
  EXPECT_GT(slowed, 0);
  EXPECT_GT(blended, 0);
  EXPECT_EQ(kept + slowed + blended, 64);
}

namespace {

// Logits and loss of the CPU model (double) against the plain reference, for one config.
void expect_matches_reference(const LlamaConfig& c, uint64_t seed) {
  const int B = 2, T = 7;
  RandomModel<LlamaCpu<double>> run(c, B, T, seed);
  auto& [model, p, x, y] = run;
  y[4] = -1;
  model.forward(x.data(), y.data(), B, T, p);
  ReferenceLlama ref(c, model.params(), p.params());
  auto zr = ref.logits(x, B, T);
  auto z = model.logits();
  ASSERT_EQ(z.size(), zr.size());
  double worst = 0;
  for (size_t i = 0; i < z.size(); ++i) worst = std::max(worst, std::abs(z[i] - zr[i]) / (1 + std::abs(zr[i])));
  EXPECT_LT(worst, 1e-6) << "logits differ";  // the logits() copy is float
  EXPECT_NEAR(model.mean_loss(), reference_loss(zr, y, c.vocab_size), 1e-12);
}

}  // namespace

// The angles are transformers' fp32 ones: at large positions they differ from the exact product by
// far more than fp32 tolerance of the cosine, and a pretrained model saw these.
TEST(LlamaModel, RopeAnglesAreTransformersFp32Products) {
  LlamaConfig c = llama_preset("llama-tiny");
  c.max_position_embeddings = 8192;
  const auto inv = llama_rope_inv_freq(c);
  const auto angles = llama_rope_angles(c, 8192);
  ASSERT_EQ(angles.size(), 8192 * inv.size());
  const size_t t = 8191, half = inv.size();
  EXPECT_EQ(angles[t * half], 8191.0) << "inverse frequency 1: the position itself";
  const float fp32 = static_cast<float>(8191.0f * static_cast<float>(inv[1]));
  EXPECT_EQ(angles[t * half + 1], static_cast<double>(fp32));
  EXPECT_GT(std::abs(angles[t * half + 1] - 8191.0 * inv[1]), 1e-5) << "not the exact product";
}

TEST(LlamaModel, LogitsMatchAPlainReference) {
  auto gqa = micro_config();
  expect_matches_reference(gqa, 10);
  auto mha = micro_config();
  mha.num_kv_heads = 4, mha.tie_word_embeddings = true, mha.qkv_bias = true, mha.o_bias = true;
  expect_matches_reference(mha, 20);
  auto mqa = micro_config();  // one kv head for all four query heads
  mqa.num_kv_heads = 1, mqa.qkv_bias = true;
  mqa.rope_scaling = {RopeScaling::Kind::Llama3, 4.0, 1.0, 4.0, 8};
  expect_matches_reference(mqa, 30);
}

namespace {

// Every parameter tensor's gradient against central differences, on a 2 x 5 batch with an ignored
// position; returns the worst error.
double whole_model_gradient_error(const LlamaConfig& c, uint64_t seed) {
  const int B = 2, T = 5;
  RandomModel<LlamaCpu<double>> run(c, B, T, seed);
  run.targets[3] = -1;
  return whole_model_gradient_error(run, B, T, [](const ParamSpec& s) { return s.numel; });
}

}  // namespace

TEST(LlamaModel, GradientsMatchFiniteDifferencesGqaUntied) {
  double err = whole_model_gradient_error(micro_config(), 1);
  std::printf("worst relative gradient error (GQA 4/2, untied): %.2e\n", err);
}

TEST(LlamaModel, GradientsMatchFiniteDifferencesMhaTiedWithBiases) {
  auto c = micro_config();
  c.num_kv_heads = 4, c.tie_word_embeddings = true, c.qkv_bias = true, c.o_bias = true;
  double err = whole_model_gradient_error(c, 2);
  std::printf("worst relative gradient error (MHA, tied, q/k/v/o biases): %.2e\n", err);
}

TEST(LlamaModel, GradientsMatchFiniteDifferencesGqaTiedLlama3Rope) {
  auto c = micro_config();
  c.tie_word_embeddings = true, c.qkv_bias = true;  // Qwen2's biases
  c.rope_scaling = {RopeScaling::Kind::Llama3, 4.0, 1.0, 4.0, 8};
  double err = whole_model_gradient_error(c, 3);
  std::printf("worst relative gradient error (GQA, tied, qkv bias, llama3 rope): %.2e\n", err);
}

TEST(LlamaModel, IgnoredTargetsTakeNoPart) {
  auto c = micro_config();
  const int B = 2, T = 6;
  RandomModel<LlamaCpu<double>> run(c, B, T, 5);
  auto& [model, p, x, y] = run;
  // Loss is the mean over counted rows only, and the target at an ignored row does not matter.
  auto y_ignored = y;
  y_ignored[0] = y_ignored[7] = y_ignored[11] = -1;
  model.forward(x.data(), y_ignored.data(), B, T, p);
  const double loss = model.mean_loss();
  auto z = model.logits();
  std::vector<double> zd(z.begin(), z.end());
  EXPECT_NEAR(loss, reference_loss(zd, y_ignored, c.vocab_size), 1e-6);
  p.zero_grads();
  model.backward(p, p, 1.0f);
  std::vector<double> g(p.grads(), p.grads() + p.size());
  auto y_other = y_ignored;
  y_other[0] = -100;  // transformers' ignore_index is just another negative
  model.forward(x.data(), y_other.data(), B, T, p);
  EXPECT_EQ(model.mean_loss(), loss);
  p.zero_grads();
  model.backward(p, p, 1.0f);
  for (size_t i = 0; i < p.size(); ++i) ASSERT_EQ(p.grads()[i], g[i]) << i;
  // Every target ignored: loss 0 and no gradient at all.
  std::vector<int32_t> none(B * T, -1);
  EXPECT_EQ(model.forward(x.data(), none.data(), B, T, p), 0.0f);
  p.zero_grads();
  model.backward(p, p, 1.0f);
  for (size_t i = 0; i < p.size(); ++i) ASSERT_EQ(p.grads()[i], 0.0) << i;
}

TEST(LlamaModel, GradScaleScalesGradientsAndGradientsAccumulate) {
  auto c = micro_config();
  RandomModel<LlamaCpu<double>> run(c, 1, 6, 8);
  const auto g1 = gradients_then_accumulated(run, 1, 6);
  const auto& p = run.params;
  double gmax = 0;
  for (double v : g1) gmax = std::max(gmax, std::abs(v));
  ASSERT_GT(gmax, 0.0);
  for (size_t i = 0; i < p.size(); ++i) ASSERT_NEAR(p.grads()[i], 3 * g1[i], 1e-12 * gmax) << i;
}

TEST(LlamaModel, InitialLossIsLnVocabAndInitIsReproducible) {
  auto c = llama_preset("llama-tiny");
  LlamaCpu<float> model(c, 4, 32);
  LocalParams<float> p(model);
  expect_initial_loss_is_ln_vocab(model, p, 11);
  // N(0, 0.02) matrices, ones for norms, zeros for biases.
  for (const auto& s : model.params()) {
    const float* w = p.params() + s.offset;
    if (s.shape.size() == 1) {
      for (size_t i = 0; i < s.numel; ++i) ASSERT_EQ(w[i], 1.0f) << s.name;
      continue;
    }
    double sq = 0;
    for (size_t i = 0; i < s.numel; ++i) sq += double(w[i]) * w[i];
    EXPECT_NEAR(std::sqrt(sq / s.numel), 0.02, 0.002) << s.name;
  }
  auto biased = c;
  biased.qkv_bias = true;
  LlamaCpu<float> bm(biased, 1, 4);
  std::vector<float> bp(bm.num_params());
  bm.init_params(bp.data(), 1);
  for (const auto& s : bm.params()) {
    if (!s.name.ends_with(".bias")) continue;
    for (size_t i = 0; i < s.numel; ++i) ASSERT_EQ(bp[s.offset + i], 0.0f) << s.name;
  }
}

TEST(LlamaModel, FloatModelAgreesWithFloat64Reference) {
  auto c = micro_config();
  c.qkv_bias = true;
  expect_float_agrees_with_float64<LlamaCpu>(c);
}

TEST(LlamaModel, ActivationCheckpointingGivesIdenticalGradients) {
  expect_checkpointing_changes_only_memory<LlamaCpu>(micro_config());
}

TEST(LlamaModel, FollowsTheLayerProtocolTiedAndUntied) {
  for (bool tied : {false, true}) {
    SCOPED_TRACE(tied ? "tied" : "untied");
    auto c = micro_config();
    c.tie_word_embeddings = tied;
    LlamaCpu<float> model(c, 1, 8, /*activation_checkpointing=*/true);
    LocalParams<float> p(model);
    model.init_params(p.params(), 3);
    ProtocolChecker checker(p, p, model);
    checker.run(model, random_tokens(8, c.vocab_size, 17), 1, 8);
    EXPECT_EQ(checker.forward_acquires, (std::vector<int>{0, 1, 2, 3})) << tied;
    EXPECT_EQ(checker.order, (std::vector<int>{3, 2, 1, 0})) << tied;  // head, blocks top-down, embedding
    // Tied: the embedding is acquired with the head; untied: only for its own backward, last.
    const std::vector<int> expected = tied ? std::vector<int>{3, 0, 2, 1} : std::vector<int>{3, 2, 1, 0};
    EXPECT_EQ(checker.backward_acquires, expected) << tied;
  }
}

TEST(LlamaModel, LearnsToCopyThePreviousToken) {
  // target[t] = input[t-1] over 16 of the 256 tokens: the unigram guess is ln 16 = 2.77; going far
  // below it needs attention to the previous position, i.e. working RoPE and causal attention.
  openblas_set_num_threads(1);  // tiny matmuls: BLAS threads only add waiting
  auto c = llama_preset("llama-tiny");
  const int B = 8, T = 32;
  LlamaCpu<float> model(c, B, T);
  LocalParams<float> p(model);
  model.init_params(p.params(), 1);
  PlainAdamW adam(p.size(), 3e-3f, 0.01f);
  std::mt19937_64 rng(5);
  float first = 0, last = 0;
  for (int step = 0; step < 300; ++step) {
    std::vector<int32_t> x(B * T), y(B * T);
    for (int i = 0; i < B * T; ++i) x[i] = static_cast<int32_t>(rng() % 16);
    for (int i = 0; i < B * T; ++i) y[i] = i % T == 0 ? -1 : x[i - 1];
    last = adam.train_step(model, p, x.data(), y.data(), B, T);
    if (step == 0) first = last;
  }
  std::printf("copy-previous-token loss: %.3f -> %.3f after 300 AdamW steps\n", first, last);
  EXPECT_NEAR(first, std::log(256.0f), 0.1f);
  EXPECT_LT(last, 0.5f) << "from " << first;
}

TEST(LlamaModel, FlopsCountTheMatmulsAndAttention) {
  auto c = micro_config();  // C 12, F 20, L 2, QD 16, KVD 8, V 37
  const double per_token = 2.0 * 2 * (12 * 16 + 2 * 12 * 8 + 16 * 12 + 3 * 12 * 20) + 2.0 * 12 * 37;
  const double attention = 2.0 * 2 * 2 * 16 * (5.0 * 6 / 2);  // L * 2 ops * 2 products * QD * T(T+1)/2
  EXPECT_DOUBLE_EQ(llama_forward_flops(c, 3, 5), 3 * 5 * per_token + 3 * attention);
  LlamaCpu<float> model(c, 1, 8);
  EXPECT_DOUBLE_EQ(model.forward_flops(3, 5), llama_forward_flops(c, 3, 5));
}

TEST(LlamaModel, RejectsBadInput) {
  auto c = micro_config();
  LlamaCpu<float> model(c, 2, 8);
  LocalParams<float> p(model);
  expect_refuses_bad_batches(model, p);
  EXPECT_THROW(LlamaCpu<double>(c, 1, 8).param_dtype(), dsx::Error);
  EXPECT_EQ(model.param_dtype(), dsx::kernels::DType::F32);
}

TEST(LlamaModel, FactoryBuildsTheCpuModelOnly) {
  auto c = micro_config();
  LlamaOptions o;
  o.max_batch = 2, o.max_seq = 8, o.activation_checkpointing = true;
  auto model = make_llama(c, o);
  EXPECT_FALSE(model->on_device());
  EXPECT_EQ(model->num_layers(), 4);
  EXPECT_EQ(model->vocab_size(), 37);
  EXPECT_EQ(model->max_seq_len(), 8);
  o.dtype = dsx::kernels::DType::BF16;
  try {
    make_llama(c, o);
    FAIL() << "bf16 CPU model built";
  } catch (const dsx::Error& e) {
    EXPECT_EQ(e.kind(), dsx::ErrorKind::Unsupported);
  }
#ifndef DSX_HAVE_CUDA  // a CUDA build makes LlamaCuda (tests/gpu/test_gpu_llama.cpp)
  o.dtype = dsx::kernels::DType::F32, o.cuda = true;
  try {
    make_llama(c, o);
    FAIL() << "CUDA model built";
  } catch (const dsx::Error& e) {
    EXPECT_EQ(e.kind(), dsx::ErrorKind::Unsupported);
    EXPECT_NE(std::string(e.what()).find("built without CUDA"), std::string::npos) << e.what();
  }
#endif
}
