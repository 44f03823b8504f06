// GPT-2 on the GPU against the CPU model on the same random weights and batch: logits, loss and
// every parameter gradient, fp32 within 1e-4, bf16 within 2e-2 and fp16 within 5e-3 (relative to each tensor's
// largest magnitude); activation checkpointing gives the same gradients. The gradients are the same
// bits on every run (no atomics), and each matmul shape is planned once. Skips without a GPU.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <set>
#include <string>
#include <type_traits>

#include "dsx/error.h"
#include "models/gpt2/gpt2_cpu.h"
#include "models/gpt2/gpt2_cuda.h"
#include "models/local_params.h"
#include "tests/gpu/gpu_model_checks.h"
#include "trace/recorder.h"

using namespace dsx::models;

namespace {

GPT2Config test_config() {
  return gpt2_config(/*max_seq_len=*/64, /*vocab_size=*/300, /*num_layers=*/2, /*num_heads=*/4, /*channels=*/64);
}

// GPT2Cuda<T> of B x Tn on device parameters initialised as GPT2Cpu initialises them from seed 5.
template <class T>
struct InitialisedGpt2 {
  InitialisedGpt2(int B, int Tn) : gpu(test_config(), B, Tn), dev(gpu) {
    std::vector<float> weights(gpu.num_params());
    GPT2Cpu<float>(test_config(), 1, 1).init_params(weights.data(), 5);
    dev.upload(weights.data());
  }
  GPT2Cuda<T> gpu;
  dsx::test::DeviceParams<T> dev;
};

template <class T>
void compare_with_cpu(double tol, bool checkpointing) {
  if (!dsx::test::have_gpu()) GTEST_SKIP() << "no GPU visible";
  auto c = test_config();
  const int B = 2, Tn = 48;
  GPT2Cpu<float> cpu(c, B, Tn);
  GPT2Cuda<T> gpu(c, B, Tn, checkpointing);
  LocalParams<float> host(cpu);
  cpu.init_params(host.params(), 3);
  std::mt19937_64 rng(4);
  std::normal_distribution<float> noise(0.0f, 0.05f);
  for (size_t i = 0; i < host.size(); ++i) host.params()[i] += noise(rng);  // LayerNorms and biases matter too
  // 16-bit weights: the CPU reference runs on the same rounded values.
  constexpr bool fp16 = std::is_same_v<T, __half>;
  if (sizeof(T) == 2)
    for (size_t i = 0; i < host.size(); ++i) {
      float& p = host.params()[i];
      p = fp16 ? dsx::kernels::fp16_to_float(dsx::kernels::float_to_fp16(p))
               : dsx::kernels::bf16_to_float(dsx::kernels::float_to_bf16(p));
    }
  dsx::test::DeviceParams<T> dev(gpu);
  dev.upload(host.params());
  std::vector<int32_t> x(B * Tn), y(B * Tn);
  for (auto& t : x) t = static_cast<int32_t>(rng() % c.vocab_size);
  for (auto& t : y) t = static_cast<int32_t>(rng() % c.vocab_size);
  y[5] = -1;
  dsx::test::expect_gpu_matches_cpu(cpu, host, gpu, dev, x, y, B, Tn, tol);
}

// Three backward passes over the same weights and batch, many tokens repeated: the bias, LayerNorm
// and embedding gradients sum over rows, and must do so in the same order every time.
template <class T>
void gradients_are_reproducible() {
  if (!dsx::test::have_gpu()) GTEST_SKIP() << "no GPU visible";
  const int B = 4, Tn = 64;
  InitialisedGpt2<T> m(B, Tn);
  std::mt19937_64 rng(6);
  std::vector<int32_t> x(B * Tn), y(B * Tn);
  for (auto& t : x) t = static_cast<int32_t>(rng() % 17);  // 17 distinct tokens over 256 rows
  for (auto& t : y) t = static_cast<int32_t>(rng() % test_config().vocab_size);
  dsx::test::expect_bitwise_reproducible_gradients(m.gpu, m.dev, x, y, B, Tn);
}

}  // namespace

TEST(Gpt2Cuda, Fp32GradientsAreBitwiseReproducible) { gradients_are_reproducible<float>(); }
TEST(Gpt2Cuda, Bf16GradientsAreBitwiseReproducible) { gradients_are_reproducible<__nv_bfloat16>(); }

// cuBLASLt plans are made on the first step only: later steps reuse them.
TEST(Gpt2Cuda, MatmulPlansAreBuiltOnce) {
  if (!dsx::test::have_gpu()) GTEST_SKIP() << "no GPU visible";
  const int B = 2, Tn = 32;
  InitialisedGpt2<__nv_bfloat16> m(B, Tn);
  auto& [gpu, dev] = m;
  std::vector<int32_t> x(B * Tn, 1), y(B * Tn, 2);
  size_t after_first = 0;
  for (int step = 0; step < 3; ++step) {
    gpu.forward(x.data(), y.data(), B, Tn, dev);
    gpu.backward(dev, dev, 1.0f);
    if (step == 0) after_first = gpu.blas().plans_built();
  }
  EXPECT_GT(after_first, 0u);
  // 15 shapes a step (5 linears: forward, dinp, dweight), times the pointer alignments that occur.
  EXPECT_LE(after_first, 60u) << "plans keyed on something that changes every call";
  EXPECT_EQ(gpu.blas().plans_built(), after_first) << "later steps planned matmuls again";
}

// A constructor that runs out of device memory part-way frees everything it had made (the
// stream, the cuBLASLt handle and workspace, the buffers allocated before the failing one).
TEST(Gpt2Cuda, ConstructorOutOfMemoryLeaksNothing) {
  if (!dsx::test::have_gpu()) GTEST_SKIP() << "no GPU visible";
  auto c = test_config();
  { GPT2Cuda<float> warm_up(c, 1, 8); }  // the context and cuBLASLt's own state exist from here on
  size_t free_before = 0, free_after = 0, total = 0;
  ASSERT_EQ(cudaMemGetInfo(&free_before, &total), cudaSuccess);
  // Each (N, C) fp32 activation a quarter of the GPU: the first few fit, a later one fails.
  const int batch = static_cast<int>(std::min<size_t>(total / (size_t(c.max_seq_len) * c.channels * 4) / 4, 1 << 30));
  EXPECT_THROW(GPT2Cuda<float>(c, batch, c.max_seq_len), dsx::Error);
  cudaGetLastError();
  ASSERT_EQ(cudaMemGetInfo(&free_after, &total), cudaSuccess);
  const double leaked_mib = (double(free_before) - double(free_after)) / (1 << 20);
  EXPECT_LT(leaked_mib, 4.0) << "device memory not returned after the failed constructor";
}

TEST(Gpt2Cuda, Fp32MatchesCpu) { compare_with_cpu<float>(1e-4, false); }
TEST(Gpt2Cuda, Fp32WithCheckpointingMatchesCpu) { compare_with_cpu<float>(1e-4, true); }
TEST(Gpt2Cuda, Bf16MatchesCpu) { compare_with_cpu<__nv_bfloat16>(2e-2, false); }
// fp16 keeps 3 more mantissa bits than bf16; the random test weights stay far from its range limit.
TEST(Gpt2Cuda, Fp16MatchesCpu) { compare_with_cpu<__half>(5e-3, false); }

// While a trace records, each layer's kernels get a span stamped by the stream itself (host tasks
// of the model's device, in stream order), on the track "cuda:<n> model"; while none records,
// nothing is enqueued and no span appears.
TEST(Gpt2Cuda, LayerSpansAreStampedByTheStream) {
  if (!dsx::test::have_gpu()) GTEST_SKIP() << "no GPU visible";
  const int B = 2, Tn = 16;
  InitialisedGpt2<float> m(B, Tn);
  std::vector<int32_t> x(B * Tn, 3), y(B * Tn, 4);
  auto& recorder = dsx::trace::Recorder::instance();
  const auto gpu_spans = dsx::test::gpu_layer_span_names;
  auto step = [&] {
    m.gpu.forward(x.data(), y.data(), B, Tn, m.dev);
    m.gpu.backward(m.dev, m.dev, 1.0f);
    m.gpu.logits();  // waits for the stream, and so for its host tasks
  };
  recorder.clear();
  recorder.start();
  step();
  recorder.stop();
  EXPECT_EQ(gpu_spans(), (std::multiset<std::string>{"forward layer 1", "forward layer 2", "backward layer 1",
                                                     "backward layer 2"}));
  recorder.clear();
  step();
  EXPECT_TRUE(gpu_spans().empty());
}
