// The Llama family on the GPU (LlamaCuda) against the CPU model (LlamaCpu<float>) on the same
// random weights and batch: logits, loss and every parameter gradient, on llama-tiny (GQA 4/2,
// untied) and a Qwen2-like shape (GQA 4/1, tied, q/k/v biases, rope_theta 1e6). fp32 within
// 1e-4 of each tensor's largest magnitude, with and without activation checkpointing, on the
// model's own stream and on a given one; bf16 and fp16 with dsx's own attention kernels
// (DSX_ATTENTION=own) and with cuDNN's fused attention (skipped, saying why, where the build or GPU
// has none). Gradients are the same bits run to run; the layer protocol of models/model.h holds;
// a loss kept on the device costs no host wait. Skips without a GPU.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <random>
#include <set>
#include <string>
#include <type_traits>

#include "dsx/error.h"
#include "models/llama/factory.h"
#include "models/llama/llama_cpu.h"
#include "models/llama/llama_cuda.h"
#include "models/local_params.h"
#include "tests/gpu/gpu_model_checks.h"
#include "tests/gpu/step_sync_count.h"
#include "tests/models/protocol_checker.h"
#include "tests/models/random_model.h"

using namespace dsx::models;
using namespace dsx::test;

namespace {

// DSX_ATTENTION for one scope (the model reads it when built).
class AttentionEnv {
 public:
  explicit AttentionEnv(const char* value) {
    if (value) {
      setenv("DSX_ATTENTION", value, 1);
    } else {
      unsetenv("DSX_ATTENTION");
    }
  }
  ~AttentionEnv() { unsetenv("DSX_ATTENTION"); }
  AttentionEnv(const AttentionEnv&) = delete;
  AttentionEnv& operator=(const AttentionEnv&) = delete;
};

LlamaConfig tiny() { return llama_preset("llama-tiny"); }

// Qwen2's layout at a test's size: tied head, q/k/v biases, one kv head for four query heads.
LlamaConfig qwen2_like() {
  LlamaConfig c = llama_preset("llama-tiny");
  c.architecture = "Qwen2ForCausalLM", c.model_type = "qwen2";
  c.vocab_size = 320, c.hidden_size = 64, c.intermediate_size = 96, c.num_heads = 4,
  c.num_kv_heads = 1;
  c.head_dim = 16, c.rope_theta = 1e6, c.rms_norm_eps = 1e-6;
  c.tie_word_embeddings = true, c.qkv_bias = true;
  return c;
}

// Random weights: the initialisation plus noise, so norms and biases matter too; 16-bit models
// get the same values rounded, and the CPU runs on the rounded ones.
template <class T>
std::vector<float> random_weights(const LlamaConfig& c, size_t n, uint64_t seed) {
  std::vector<float> w(n);
  LlamaCpu<float>(c, 1, 1).init_params(w.data(), seed);
  std::mt19937_64 rng(seed + 1);
  std::normal_distribution<float> noise(0.0f, 0.05f);
  for (auto& p : w) {
    p += noise(rng);
    if constexpr (std::is_same_v<T, __half>)
      p = dsx::kernels::fp16_to_float(dsx::kernels::float_to_fp16(p));
    if constexpr (std::is_same_v<T, __nv_bfloat16>)
      p = dsx::kernels::bf16_to_float(dsx::kernels::float_to_bf16(p));
  }
  return w;
}

struct Case {
  LlamaConfig config;
  bool checkpointing = false;
  bool cudnn = false;            // built with DSX_ATTENTION unset (cuDNN where it can), else =own
  bool external_stream = false;  // a stream of the test's, and a sink that orders by it
};

// A stream of the test's own, or none.
class TestStream {
 public:
  explicit TestStream(bool make) {
    if (make && cudaStreamCreate(&s_) != cudaSuccess) s_ = nullptr;
  }
  ~TestStream() {
    if (s_) cudaStreamDestroy(s_);
  }
  TestStream(const TestStream&) = delete;
  TestStream& operator=(const TestStream&) = delete;
  cudaStream_t get() const { return s_; }

 private:
  cudaStream_t s_ = nullptr;
};

template <class T>
void compare_with_cpu(const Case& k, double tol) {
  if (!have_gpu()) GTEST_SKIP() << "no GPU visible";
  const LlamaConfig& c = k.config;
  const int B = 2, Tn = 48;
  AttentionEnv env(k.cudnn ? nullptr : "own");
  TestStream given(k.external_stream);
  ASSERT_EQ(given.get() != nullptr, k.external_stream) << "cudaStreamCreate";
  LlamaCpu<float> cpu(c, B, Tn);
  LlamaCuda<T> gpu(c, B, Tn, k.checkpointing, given.get());
  if (given.get()) {
    EXPECT_EQ(gpu.stream(), given.get());
  }
  const LlamaAttention expected = k.cudnn ? LlamaAttention::Cudnn : LlamaAttention::Own;
  if (k.cudnn && gpu.attention_for(B, Tn) != expected) {
    GTEST_SKIP() << "cuDNN's fused attention does not take this shape here (a build without "
                    "DSX_HAVE_CUDNN_ATTENTION, or CudnnAttention::supported said no on this GPU)";
  }
  EXPECT_EQ(gpu.attention_for(B, Tn), expected);
  LocalParams<float> host(cpu);
  const auto w = random_weights<T>(c, host.size(), 3);
  std::copy(w.begin(), w.end(), host.params());
  DeviceParams<T> dev(gpu, k.external_stream);
  dev.upload(host.params());
  const auto x = random_tokens(B * Tn, c.vocab_size, 4);
  auto y = random_tokens(B * Tn, c.vocab_size, 5);
  y[5] = -1;
  expect_gpu_matches_cpu(cpu, host, gpu, dev, x, y, B, Tn, tol);
}

// Three backward passes over the same weights and batch, many tokens repeated: the RMSNorm
// weights, biases, embedding and grouped kv heads sum over rows or heads, in the same order
// every time.
template <class T>
void gradients_are_reproducible(const LlamaConfig& c) {
  if (!have_gpu()) GTEST_SKIP() << "no GPU visible";
  AttentionEnv env("own");
  const int B = 4, Tn = 64;
  LlamaCuda<T> gpu(c, B, Tn);
  DeviceParams<T> dev(gpu);
  const auto w = random_weights<T>(c, gpu.num_params(), 5);
  dev.upload(w.data());
  const auto x = random_tokens(B * Tn, 17, 6);  // 17 distinct tokens over 256 rows
  const auto y = random_tokens(B * Tn, c.vocab_size, 7);
  expect_bitwise_reproducible_gradients(gpu, dev, x, y, B, Tn);
}

}  // namespace

TEST(LlamaCuda, Fp32MatchesCpuGqaUntied) { compare_with_cpu<float>({tiny()}, 1e-4); }
TEST(LlamaCuda, Fp32MatchesCpuQwen2LikeTiedWithBiases) {
  compare_with_cpu<float>({qwen2_like()}, 1e-4);
}
TEST(LlamaCuda, Fp32WithCheckpointingMatchesCpu) { compare_with_cpu<float>({tiny(), true}, 1e-4); }
TEST(LlamaCuda, Fp32WithCheckpointingMatchesCpuQwen2Like) {
  compare_with_cpu<float>({qwen2_like(), true}, 1e-4);
}
TEST(LlamaCuda, Fp32OnAGivenStreamWithADeviceOrderedSink) {
  compare_with_cpu<float>({tiny(), false, false, true}, 1e-4);
}
TEST(LlamaCuda, Bf16OwnAttentionMatchesCpu) { compare_with_cpu<__nv_bfloat16>({tiny()}, 2e-2); }
TEST(LlamaCuda, Bf16OwnAttentionMatchesCpuQwen2Like) {
  compare_with_cpu<__nv_bfloat16>({qwen2_like()}, 2e-2);
}
TEST(LlamaCuda, Fp16OwnAttentionMatchesCpu) { compare_with_cpu<__half>({tiny()}, 5e-3); }
// cuDNN rounds the softmax probabilities to 16 bits before they weight v: a looser bound.
TEST(LlamaCuda, Bf16CudnnAttentionMatchesCpu) {
  compare_with_cpu<__nv_bfloat16>({tiny(), false, true}, 3e-2);
}
TEST(LlamaCuda, Bf16CudnnAttentionMatchesCpuQwen2Like) {
  compare_with_cpu<__nv_bfloat16>({qwen2_like(), false, true}, 3e-2);
}
TEST(LlamaCuda, Bf16CudnnAttentionWithCheckpointingMatchesCpu) {
  compare_with_cpu<__nv_bfloat16>({qwen2_like(), true, true}, 3e-2);
}
TEST(LlamaCuda, Fp16CudnnAttentionMatchesCpu) {
  compare_with_cpu<__half>({tiny(), false, true}, 1e-2);
}

TEST(LlamaCuda, Fp32GradientsAreBitwiseReproducible) { gradients_are_reproducible<float>(tiny()); }
TEST(LlamaCuda, Bf16GradientsAreBitwiseReproducible) {
  gradients_are_reproducible<__nv_bfloat16>(qwen2_like());
}

// With the loss kept on the device (Model::keep_loss_on_device) and a sink that orders by the
// model's stream, forward and backward make no blocking host wait (counted on the emulated GPU):
// the targets are counted, the mean loss taken and the embedding's rows grouped by token on the
// GPU. The kept loss is the one a forward returns at once and the CPU's (two targets ignored),
// and the gradients are the same bits either way.
TEST(LlamaCuda, KeepsTheLossOnTheDeviceWithoutAHostWait) {
  if (!have_gpu()) GTEST_SKIP() << "no GPU visible";
  AttentionEnv env("own");
  const LlamaConfig c = tiny();
  const int B = 2, Tn = 32;
  LlamaCpu<float> cpu(c, B, Tn);
  LlamaCuda<float> gpu(c, B, Tn);
  LocalParams<float> host(cpu);
  const auto w = random_weights<float>(c, host.size(), 8);
  std::copy(w.begin(), w.end(), host.params());
  DeviceParams<float> dev(gpu, /*device_ordered=*/true);
  dev.upload(host.params());
  const auto x = random_tokens(B * Tn, 11, 9);  // 11 distinct tokens: groups of several rows
  auto y = random_tokens(B * Tn, c.vocab_size, 10);
  y[3] = -1, y[40] = -1;
  const float expected = cpu.forward(x.data(), y.data(), B, Tn, host);
  const float at_once = gpu.forward(x.data(), y.data(), B, Tn, dev);
  gpu.backward(dev, dev, 1.0f);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const auto grads_at_once = dev.grads();

  ASSERT_TRUE(gpu.keep_loss_on_device(true));
  dev.zero_grads();
  StepSyncs syncs;
  syncs.begin_step();
  EXPECT_TRUE(std::isnan(gpu.forward(x.data(), y.data(), B, Tn, dev)));
  gpu.backward(dev, dev, 1.0f);
  syncs.end_step();
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  float kept = 0.0f;
  ASSERT_EQ(cudaMemcpy(&kept, gpu.device_loss(), sizeof kept, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(kept, at_once);
  EXPECT_LT(std::abs(kept - expected), 1e-4 * expected) << kept << " vs the CPU's " << expected;
  EXPECT_TRUE(dev.grads() == grads_at_once) << "the gradients differ with the loss kept";
  for (uint64_t n : syncs.per_step()) EXPECT_EQ(n, 0u) << syncs.line("forward + backward, loss kept");
}

// While a trace records, each layer's kernels get a span stamped by the stream itself (the
// model device's host tasks, in stream order) on the track "cuda:<n> model"; while none
// records, no span appears.
TEST(LlamaCuda, LayerSpansAreStampedByTheStream) {
  if (!have_gpu()) GTEST_SKIP() << "no GPU visible";
  AttentionEnv env("own");
  const LlamaConfig c = tiny();
  const int B = 1, Tn = 8;
  LlamaCuda<float> gpu(c, B, Tn);
  DeviceParams<float> dev(gpu);
  const auto w = random_weights<float>(c, gpu.num_params(), 3);
  dev.upload(w.data());
  const auto x = random_tokens(B * Tn, c.vocab_size, 11), y = random_tokens(B * Tn, c.vocab_size, 12);
  auto step = [&] {
    gpu.forward(x.data(), y.data(), B, Tn, dev);
    gpu.backward(dev, dev, 1.0f);
    gpu.logits();  // waits for the stream, and so for its host tasks
  };
  std::multiset<std::string> expected;
  for (int l = 1; l <= c.num_layers; ++l)
    expected.insert({"forward layer " + std::to_string(l), "backward layer " + std::to_string(l)});
  auto& recorder = dsx::trace::Recorder::instance();
  recorder.clear();
  recorder.start();
  step();
  recorder.stop();
  EXPECT_EQ(gpu_layer_span_names(), expected);
  recorder.clear();
  step();
  EXPECT_TRUE(gpu_layer_span_names().empty());
}

TEST(LlamaCuda, FollowsTheLayerProtocolTiedAndUntied) {
  if (!have_gpu()) GTEST_SKIP() << "no GPU visible";
  for (bool tied : {false, true}) {
    SCOPED_TRACE(tied ? "tied" : "untied");
    auto c = tiny();
    c.tie_word_embeddings = tied;
    LlamaCuda<float> model(c, 1, 8, /*activation_checkpointing=*/true);
    DeviceParams<float> p(model);
    const auto w = random_weights<float>(c, model.num_params(), 3);
    p.upload(w.data());
    ProtocolChecker checker(p, p, model);
    checker.run(model, random_tokens(8, c.vocab_size, 17), 1, 8);
    EXPECT_EQ(checker.forward_acquires, (std::vector<int>{0, 1, 2, 3})) << tied;
    EXPECT_EQ(checker.order, (std::vector<int>{3, 2, 1, 0}))
        << tied;  // head, blocks top-down, embedding
    const std::vector<int> expected =
        tied ? std::vector<int>{3, 0, 2, 1} : std::vector<int>{3, 2, 1, 0};
    EXPECT_EQ(checker.backward_acquires, expected) << tied;
  }
}

TEST(LlamaCuda, FactoryBuildsTheCudaModel) {
  if (!have_gpu()) GTEST_SKIP() << "no GPU visible";
  LlamaOptions o;
  o.cuda = true, o.dtype = dsx::kernels::DType::BF16, o.max_batch = 2, o.max_seq = 16;
  auto model = make_llama(qwen2_like(), o);
  EXPECT_TRUE(model->on_device());
  EXPECT_EQ(model->param_dtype(), dsx::kernels::DType::BF16);
  EXPECT_EQ(model->num_layers(), qwen2_like().num_layers + 2);
  EXPECT_GT(model->activation_bytes(), 0u);
}

TEST(LlamaCuda, RefusesAnUnknownAttentionChoice) {
  if (!have_gpu()) GTEST_SKIP() << "no GPU visible";
  AttentionEnv env("flash");
  try {
    LlamaCuda<float> model(tiny(), 1, 8);
    FAIL() << "DSX_ATTENTION=flash accepted";
  } catch (const dsx::Error& e) {
    EXPECT_EQ(e.kind(), dsx::ErrorKind::Config);
    EXPECT_NE(std::string(e.what()).find("DSX_ATTENTION"), std::string::npos) << e.what();
  }
}

// fp32 has no cuDNN path: DSX_ATTENTION=cudnn is refused by name rather than ignored.
TEST(LlamaCuda, Fp32RefusesForcedCudnnAttention) {
  if (!have_gpu()) GTEST_SKIP() << "no GPU visible";
  AttentionEnv env("cudnn");
  EXPECT_THROW(LlamaCuda<float>(tiny(), 1, 8), dsx::Error);
}
