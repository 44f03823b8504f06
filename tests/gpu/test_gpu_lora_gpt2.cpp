// LoRA on the GPU's GPT-2 (LoraGpt2Cuda) against LoRA on the CPU's (LoraGpt2) on the same frozen
// base, adapters and batch: logits, loss and every adapter gradient in fp32 within float rounding
// (1e-5 of each tensor's largest magnitude), with every Conv1D projection adapted, and with dropout
// (both devices draw the same mask) and activation checkpointing; bf16 within bf16's rounding; the
// losses and adapters of a few SGD steps with dropout on. The base takes no gradient (its weight
// products are skipped: the sink has no memory for them); the layer protocol holds. Tiny shapes:
// the emulated GPU is slow. Skips without a GPU.
#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "models/gpt2/gpt2_cpu.h"
#include "models/local_params.h"
#include "models/lora/frozen_weights.h"
#include "models/lora/lora_gpt2.h"
#include "models/lora/lora_gpt2_cuda.h"
#include "tests/gpu/gpu_model_checks.h"
#include "tests/models/protocol_checker.h"
#include "tests/models/random_model.h"

using namespace dsx::models;
using namespace dsx::test;

namespace {

// As tests/models/data/gpt2 (what PEFT's fixtures use): 2 blocks of 32 channels, 4 heads.
GPT2Config tiny() { return gpt2_config(/*max_seq_len=*/16, /*vocab_size=*/64, 2, 4, 32); }

template <class T>
float round_to(float v) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>)
    return dsx::kernels::bf16_to_float(dsx::kernels::float_to_bf16(v));
  return v;
}

// The base: GPT-2's initialisation plus noise (LayerNorms and biases matter too), rounded to T's
// storage, which the CPU runs on as well.
template <class T>
std::vector<float> base_weights(const GPT2Config& c, uint64_t seed) {
  GPT2Cpu<float> reference(c, 1, 1);
  std::vector<float> w(reference.num_params());
  reference.init_params(w.data(), seed);
  std::mt19937_64 rng(seed + 1);
  std::normal_distribution<float> noise(0.0f, 0.05f);
  for (auto& p : w) p = round_to<T>(p + noise(rng));
  return w;
}

struct Case {
  std::string lora = "r=4,alpha=8,targets=all-linear,init=false";  // B drawn: every branch counts
  bool checkpointing = false;
};

template <class T>
void compare_with_cpu(const Case& k, double tol) {
  if (!have_gpu()) GTEST_SKIP() << "no GPU visible";
  const GPT2Config c = tiny();
  const int B = 2, Tn = 16;
  const LoraConfig lora = parse_lora_flag(k.lora);
  const auto base = base_weights<T>(c, 3);
  LoraGpt2 cpu(c, lora, B, Tn, k.checkpointing,
               std::make_unique<DenseFrozenWeights>(gpt2_param_specs(c), base));
  LoraGpt2Cuda<T> gpu(c, lora, B, Tn, k.checkpointing, base);
  ASSERT_EQ(gpu.num_params(), cpu.num_params());
  ASSERT_EQ(gpu.params().size(), cpu.params().size());
  EXPECT_EQ(gpu.frozen_bytes(), base.size() * sizeof(T));  // the base, in T, and nothing else
  LocalParams<float> host(cpu);
  std::vector<float> w(cpu.num_params());
  cpu.init_adapters(w.data(), 4);
  for (auto& p : w) p = round_to<T>(p);
  std::copy(w.begin(), w.end(), host.params());
  DeviceParams<T> dev(gpu);
  dev.upload(w.data());
  const auto x = random_tokens(B * Tn, c.vocab_size, 5);
  auto y = random_tokens(B * Tn, c.vocab_size, 6);
  y[3] = -1;
  expect_gpu_matches_cpu(cpu, host, gpu, dev, x, y, B, Tn, tol);
}

}  // namespace

TEST(GpuLoraGpt2, Fp32MatchesTheCpuOnEveryProjection) { compare_with_cpu<float>({}, 1e-5); }
TEST(GpuLoraGpt2, Fp32WithDropoutAndCheckpointingMatchesTheCpu) {
  compare_with_cpu<float>({"r=8,alpha=16,dropout=0.2,targets=c_attn,c_fc,c_proj,init=false", true},
                          1e-5);
}
// The adapters' gradients come through the backward's bf16 activations, and u and du are
// rounded to bf16 too: within 6e-2, where a wrong scale, mask or projection is 100%.
TEST(GpuLoraGpt2, Bf16MatchesTheCpuWithinBf16Rounding) {
  compare_with_cpu<__nv_bfloat16>({}, 6e-2);
}

// Four SGD steps on both devices from PEFT's initialisation (B zeros), dropout on: the losses
// step by step and the adapters at the end.
TEST(GpuLoraGpt2, SgdStepsWithDropoutGiveTheCpusLossesAndAdapters) {
  if (!have_gpu()) GTEST_SKIP() << "no GPU visible";
  const GPT2Config c = tiny();
  const int B = 2, Tn = 16;
  const LoraConfig lora = parse_lora_flag("r=4,alpha=8,dropout=0.1,targets=all-linear");
  const auto base = base_weights<float>(c, 7);
  LoraGpt2 cpu(c, lora, B, Tn, false,
               std::make_unique<DenseFrozenWeights>(gpt2_param_specs(c), base));
  LoraGpt2Cuda<float> gpu(c, lora, B, Tn, false, base);
  LocalParams<float> host(cpu);
  cpu.init_params(host.params(), 8);
  DeviceParams<float> dev(gpu);
  expect_sgd_steps_match(cpu, host, gpu, dev, c.vocab_size, B, Tn, /*steps=*/4, /*lr=*/0.5f, 2e-6,
                         1e-5);
}

TEST(GpuLoraGpt2, FollowsTheLayerProtocol) {
  if (!have_gpu()) GTEST_SKIP() << "no GPU visible";
  const GPT2Config c = tiny();
  LoraGpt2Cuda<float> model(c, parse_lora_flag("r=2,targets=all-linear"), 1, 8, true,
                            base_weights<float>(c, 1));
  DeviceParams<float> p(model);
  std::vector<float> w(model.num_params());
  model.init_params(w.data(), 2);
  p.upload(w.data());
  ProtocolChecker checker(p, p, model);
  checker.run(model, random_tokens(8, c.vocab_size, 17), 1, 8);
  EXPECT_EQ(checker.order, (std::vector<int>{3, 2, 1, 0}));
}
