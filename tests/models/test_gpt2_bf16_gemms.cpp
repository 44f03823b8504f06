// GPT-2 on the CPU with bf16 GEMMs (ds_config bf16 on CPU ranks): the same model and weights as
// fp32, its matmuls, attention products and classifier fed bf16-rounded operands. Three runs of one
// batch are compared: fp32, bf16 on oneDNN's kernels, and bf16 on the fp32 fallback
// (DSX_CPU_BF16_GEMM=off), which multiplies the same rounded operands.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "kernels/cpu/gemm_bf16.h"
#include "models/gpt2/factory.h"
#include "models/gpt2/gpt2_cpu.h"
#include "models/local_params.h"
#include "tests/models/random_model.h"

using namespace dsx::models;
using namespace dsx::test;

namespace {

struct StepResult {
  float loss;
  std::vector<float> grads;
};

// One forward and backward of a fixed batch on GPT-2 (L2, C64, V 97, T 32) from fixed weights.
StepResult run_once(bool bf16_gemms) {
  const GPT2Config c = gpt2_config(32, 97, 2, 4, 64);
  const int B = 2, T = 32;
  GPT2Cpu<float> model(c, B, T);
  model.set_bf16_gemms(bf16_gemms);
  LocalParams<float> p(model);
  randomize(p, 3);
  p.zero_grads();
  const auto x = random_tokens(size_t(B) * T, c.vocab_size, 4);
  const auto y = random_tokens(size_t(B) * T, c.vocab_size, 5);
  StepResult r{model.forward(x.data(), y.data(), B, T, p), {}};
  model.backward(p, p, 1.0f);
  r.grads.assign(p.grads(), p.grads() + p.size());
  return r;
}

// |a - b| / |b| over whole gradient vectors, in float64.
double relative_difference(const std::vector<float>& a, const std::vector<float>& b) {
  double diff = 0, norm = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
    norm += double(b[i]) * b[i];
  }
  return std::sqrt(diff / norm);
}

// bf16 keeps 8 significant bits: rounding an operand errs by at most 2^-9 relative, a product of
// two rounded operands by 2^-8. Errors of that size in every GEMM, summed with random signs, and
// carried through two blocks and the head: the gradient vector and the loss stay within a few
// 2^-8 of fp32 (measured: loss 5.9e-5, gradients 4.0e-3 relative, the attention in bf16 too), and
// must differ from it by more than fp32's own noise (1e-6), or the bf16 path did not run.
constexpr double kBf16Unit = 1.0 / 256;

TEST(Gpt2Bf16Gemms, TrainsLikeFp32WithinBf16Rounding) {
  std::printf("%s\n", dsx::kernels::cpu::bf16_gemm_choice().note.c_str());
  const StepResult fp32 = run_once(false), bf16 = run_once(true);
  const double loss_rel = std::fabs(double(bf16.loss) - fp32.loss) / fp32.loss;
  const double grad_rel = relative_difference(bf16.grads, fp32.grads);
  std::printf("bf16 vs fp32: loss %.3g, gradients %.3g relative\n", loss_rel, grad_rel);
  EXPECT_LT(loss_rel, kBf16Unit);
  EXPECT_LT(grad_rel, 4 * kBf16Unit);
  EXPECT_GT(grad_rel, 1e-5) << "the bf16 GEMMs gave fp32's gradients: the bf16 path did not run";
}

// The fallback multiplies the same bf16 operands exactly and sums in fp32, so it differs from
// oneDNN's kernels by fp32 summation order, plus the rare operand that then rounds to the
// neighbouring bf16 value. The attention rounds values made by earlier products (its
// probabilities and the scores' gradient), where such flips compound: below half of bf16's unit
// (measured: loss 1.2e-5, gradients 7.8e-4; 0 and 1.3e-4 before the attention took bf16).
TEST(Gpt2Bf16Gemms, FallbackAgreesWithTheNativeKernel) {
  const StepResult native = run_once(true);
  setenv("DSX_CPU_BF16_GEMM", "off", 1);
  const StepResult fallback = run_once(true);
  unsetenv("DSX_CPU_BF16_GEMM");
  const double loss_rel = std::fabs(double(native.loss) - fallback.loss) / fallback.loss;
  const double grad_rel = relative_difference(native.grads, fallback.grads);
  std::printf("native vs fallback: loss %.3g, gradients %.3g relative\n", loss_rel, grad_rel);
  EXPECT_LT(loss_rel, kBf16Unit / 16);
  EXPECT_LT(grad_rel, kBf16Unit / 2);
}

TEST(Gpt2Bf16Gemms, FactoryTurnsThemOnForCpuBf16Runs) {
  const GPT2Config c = gpt2_config(32, 97, 2, 4, 64);
  GPT2Options o;
  o.max_batch = 2, o.max_seq = 32;
  o.cpu_bf16_gemms = true;
  auto model = make_gpt2(c, o);
  EXPECT_EQ(model->param_dtype(), dsx::kernels::DType::F32);  // master weights stay fp32
  LocalParams<float> p(*model);
  randomize(p, 3);
  const auto x = random_tokens(64, c.vocab_size, 4), y = random_tokens(64, c.vocab_size, 5);
  EXPECT_EQ(model->forward(x.data(), y.data(), 2, 32, p), run_once(true).loss);
}

}  // namespace
