// QLoRA on the CPU Llama: LoRA over an NF4 base (models/lora/nf4_frozen_weights.h) -- the
// bitsandbytes 4-bit fixture, and Qwen2 quantised at load with its dense q/k/v biases --
// computes what a float64 Llama computes on that base dequantised, with the adapters merged
// (W + scale * B @ A): the loss, the logits and the adapters' gradients (so the NF4 forward and
// input gradient both run). A base that disagrees with config.json, and QLoRA requests dsx
// cannot honour, are refused by name.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "dsx/error.h"
#include "kernels/nf4_tensor.h"
#include "models/llama/llama_cpu.h"
#include "models/local_params.h"
#include "models/lora/lora_llama.h"
#include "models/lora/nf4_frozen_weights.h"
#include "models/lora/qlora_factory.h"
#include "tests/models/random_model.h"

using namespace dsx::models;
using namespace dsx::test;

namespace {

const std::string kBnb = std::string(DSX_SOURCE_DIR) + "/tests/models/data/llama_bnb_nf4";
constexpr int B = 2, T = 8;

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const dsx::Error& e) {
    return e.what();
  }
  return "(no error)";
}

// The base in llama_param_specs order, each NF4 linear dequantised as the kernels round it.
std::vector<double> dequantised_base(const LlamaConfig& config, const Nf4BaseWeights& base) {
  std::vector<double> flat;
  for (const auto& s : llama_param_specs(config)) {
    if (const auto it = base.linears.find(s.name); it != base.linears.end()) {
      std::vector<float> w(s.numel);
      dsx::kernels::nf4_dequantize_rows(w.data(), it->second, 0, it->second.rows);
      flat.insert(flat.end(), w.begin(), w.end());
    } else {
      const auto& v = base.dense.at(s.name).values;
      flat.insert(flat.end(), v.begin(), v.end());
    }
  }
  return flat;
}

double relative_difference(const std::vector<double>& got, const std::vector<double>& want) {
  double diff = 0, size = 0;
  for (size_t i = 0; i < got.size(); ++i)
    diff = std::max(diff, std::abs(got[i] - want[i])), size = std::max(size, std::abs(want[i]));
  return diff / size;
}

// One model against its float64 reference; `dir` is a bitsandbytes folder or a 16-bit one.
void expect_equals_reference(const std::string& dir, bool prequantized) {
  const LlamaConfig config = qlora_model_source(dir).shape.llama;
  const Nf4BaseWeights base =
      read_nf4_base_weights(dir, {.double_quant = true, .compute = dsx::kernels::DType::BF16});
  ASSERT_EQ(base.prequantized, prequantized);
  if (!prequantized) {  // Qwen2's q/k/v biases stay dense beside the NF4 weights
    ASSERT_TRUE(base.dense.count("model.layers.0.self_attn.q_proj.bias"));
  }
  const std::vector<double> dense = dequantised_base(config, base);
  auto frozen = std::make_unique<Nf4FrozenWeights>(config, base, dir);
  ASSERT_TRUE(frozen->quantized(1, Projection::down));
  EXPECT_EQ(frozen->param(0) != nullptr, true);  // the embedding stays dense
  LoraLlama qlora(config, parse_lora_flag("r=3,alpha=5,targets=all-linear"), B, T, false,
                  std::move(frozen));

  LocalParams<float> lp(qlora);
  const auto random = random_vector(lp.size(), 21, 0.3);
  std::copy(random.begin(), random.end(), lp.params());
  const auto inputs = random_tokens(B * T, config.vocab_size, 11),
             targets = random_tokens(B * T, config.vocab_size, 12);
  const float loss = qlora.forward(inputs.data(), targets.data(), B, T, lp);
  lp.zero_grads();
  qlora.backward(lp, lp, 1.0f);

  // The float64 reference: every targeted W becomes W + scale * B @ A.
  LlamaCpu<double> ref(config, B, T);
  LocalParams<double> rp(ref);
  std::copy(dense.begin(), dense.end(), rp.params());
  std::map<std::string, const ParamSpec*> by_name;
  for (const auto& spec : ref.params()) by_name[spec.name] = &spec;
  const double scale = qlora.lora().scaling();
  const auto& specs = qlora.params();
  auto weight_of = [&](const ParamSpec& a) {
    return by_name.at(a.name.substr(0, a.name.size() - std::string(".lora_A.weight").size()) +
                      ".weight");
  };
  for (size_t i = 0; i < specs.size(); i += 2) {
    const ParamSpec &a = specs[i], &b = specs[i + 1];
    const int r = a.shape[0], in = a.shape[1], out = b.shape[0];
    for (int o = 0; o < out; ++o)
      for (int c = 0; c < in; ++c) {
        double d = 0;
        for (int k = 0; k < r; ++k)
          d += double(lp.params()[b.offset + o * r + k]) * lp.params()[a.offset + k * in + c];
        rp.params()[weight_of(a)->offset + o * in + c] += scale * d;
      }
  }
  ref.forward(inputs.data(), targets.data(), B, T, rp);
  rp.zero_grads();
  ref.backward(rp, rp, 1.0f);

  EXPECT_NEAR(loss, ref.mean_loss(), 2e-6 * std::abs(ref.mean_loss()));
  const auto logits = qlora.logits(), want = ref.logits();
  EXPECT_LT(relative_difference({logits.begin(), logits.end()}, {want.begin(), want.end()}), 1e-5);
  // dA = scale * B^T @ G and dB = scale * G @ A^T, G the merged weight's gradient.
  std::vector<double> got, expected;
  for (size_t i = 0; i < specs.size(); i += 2) {
    const ParamSpec &a = specs[i], &b = specs[i + 1];
    const int r = a.shape[0], in = a.shape[1], out = b.shape[0];
    const double* G = rp.grads() + weight_of(a)->offset;
    for (int k = 0; k < r; ++k)
      for (int c = 0; c < in; ++c) {
        double d = 0;
        for (int o = 0; o < out; ++o) d += lp.params()[b.offset + o * r + k] * G[o * in + c];
        got.push_back(lp.grads()[a.offset + k * in + c]), expected.push_back(scale * d);
      }
    for (int o = 0; o < out; ++o)
      for (int k = 0; k < r; ++k) {
        double d = 0;
        for (int c = 0; c < in; ++c) d += G[o * in + c] * lp.params()[a.offset + k * in + c];
        got.push_back(lp.grads()[b.offset + o * r + k]), expected.push_back(scale * d);
      }
  }
  EXPECT_LT(relative_difference(got, expected), 1e-4);
}

}  // namespace

// The bitsandbytes fixture as saved, and Qwen2 (q/k/v biases beside NF4 weights) quantised at load.
TEST(Qlora, EqualsAFloat64LlamaOnTheDequantisedBaseWithMergedAdapters) {
  expect_equals_reference(kBnb, true);
  expect_equals_reference(std::string(DSX_SOURCE_DIR) + "/tests/models/data/qwen2", false);
}

TEST(Qlora, RefusesABaseThatDisagreesWithItsConfigAndBadRequests) {
  LlamaConfig config = qlora_model_source(kBnb).shape.llama;
  config.intermediate_size = 40;
  const std::string shape =
      error_of([&] { Nf4FrozenWeights(config, read_nf4_base_weights(kBnb), kBnb); });
  EXPECT_NE(shape.find("model.layers.0.mlp.gate_proj.weight"), std::string::npos) << shape;
  EXPECT_NE(shape.find("[48, 32]"), std::string::npos) << shape;
  const std::string dtype = error_of([] { bnb_compute_dtype("bf16"); });
  EXPECT_NE(dtype.find("bfloat16, float16 or float32"), std::string::npos) << dtype;
  const std::string preset = error_of([] { qlora_model_source("llama-tiny"); });
  EXPECT_NE(preset.find("Llama-family folder"), std::string::npos) << preset;
  // A bitsandbytes folder is QLoRA without a flag; a 16-bit one only with --load-in-4bit.
  const std::string bf16 = std::string(DSX_SOURCE_DIR) + "/tests/models/data/llama_bf16";
  EXPECT_TRUE(wants_qlora(kBnb, false));
  EXPECT_FALSE(wants_qlora(bf16, false));
  EXPECT_TRUE(wants_qlora(bf16, true));
  ModelSource source = qlora_model_source(kBnb);
  EXPECT_EQ(source.shape.llama.intermediate_size, 48);
  EXPECT_TRUE(source.initial.empty());  // the weights are read as NF4, never as fp32
  ModelBuildOptions gpu;
  gpu.cuda = true, gpu.max_batch = B, gpu.max_seq = T;
  const std::string cuda =
      error_of([&] { make_qlora_model(source, parse_lora_flag("r=2"), {}, gpu); });
  EXPECT_NE(cuda.find("--device cpu"), std::string::npos) << cuda;
}
