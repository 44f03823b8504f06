// The CPU's bf16 GEMM against a float64 reference of the same bf16-rounded operands, in the three
// transposition cases the models use (forward inp @ W^T, backward dout @ W and dout^T @ inp), on
// oneDNN's kernels where the CPU has them and on the fp32 fallback (DSX_CPU_BF16_GEMM=off).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <random>
#include <vector>

#include "kernels/cpu/bf16_matmul.h"
#include "kernels/cpu/gemm_bf16.h"
#include "kernels/dtype.h"

namespace {

namespace k = dsx::kernels;

// A stored row-major matrix of bf16 values with rows `ld` apart (ld > cols: strided like a slice).
struct Bf16Matrix {
  size_t rows, cols, ld;
  std::vector<float> exact;  // the fp32 values before rounding, to show the test can fail
  std::vector<uint16_t> bits;
  float at(size_t r, size_t c) const { return k::bf16_to_float(bits[r * ld + c]); }
};

Bf16Matrix random_matrix(size_t rows, size_t cols, size_t pad, std::mt19937& gen) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  Bf16Matrix m{rows, cols, cols + pad, {}, {}};
  m.exact.resize(rows * m.ld);
  for (float& v : m.exact) v = normal(gen);
  m.bits.resize(m.exact.size());
  k::cpu::to_bf16(m.bits.data(), m.exact.data(), m.exact.size());
  return m;
}

struct Case {
  bool trans_a, trans_b;
  size_t m, n, k;
  bool accumulate;
};

// Every entry within fp32 accumulation's bound: the products of bf16 values are exact in fp32, and
// summing k of them in fp32 (any order) errs by at most k * 2^-24 * sum |a_i b_i|. The exact
// flag compares against the unrounded fp32 operands instead, which the bound must reject.
void check(const Case& t, bool against_unrounded = false) {
  std::mt19937 gen(static_cast<unsigned>(t.m * 31 + t.n * 7 + t.k));
  Bf16Matrix a = t.trans_a ? random_matrix(t.k, t.m, 3, gen) : random_matrix(t.m, t.k, 3, gen);
  Bf16Matrix b = t.trans_b ? random_matrix(t.n, t.k, 5, gen) : random_matrix(t.k, t.n, 5, gen);
  const size_t ldc = t.n + 2;
  std::vector<float> c(t.m * ldc);
  for (size_t i = 0; i < c.size(); ++i) c[i] = 0.25f * float(i % 9);
  const std::vector<float> c0 = c;
  k::cpu::gemm_bf16(t.trans_a, t.trans_b, t.m, t.n, t.k, a.bits.data(), a.ld, b.bits.data(), b.ld,
                    t.accumulate, c.data(), ldc);
  auto a_at = [&](size_t i, size_t p) {
    const size_t r = t.trans_a ? p : i, col = t.trans_a ? i : p;
    return against_unrounded ? double(a.exact[r * a.ld + col]) : double(a.at(r, col));
  };
  auto b_at = [&](size_t p, size_t j) {
    const size_t r = t.trans_b ? j : p, col = t.trans_b ? p : j;
    return against_unrounded ? double(b.exact[r * b.ld + col]) : double(b.at(r, col));
  };
  size_t outside = 0;
  for (size_t i = 0; i < t.m; ++i)
    for (size_t j = 0; j < t.n; ++j) {
      double sum = t.accumulate ? double(c0[i * ldc + j]) : 0.0, magnitude = std::fabs(sum);
      for (size_t p = 0; p < t.k; ++p) {
        sum += a_at(i, p) * b_at(p, j);
        magnitude += std::fabs(a_at(i, p) * b_at(p, j));
      }
      const double bound = double(t.k + 1) * std::ldexp(1.0, -24) * magnitude;
      if (std::fabs(double(c[i * ldc + j]) - sum) > bound) ++outside;
    }
  if (against_unrounded) {
    EXPECT_GT(outside, t.m * t.n / 2) << "the bound cannot tell bf16 operands from fp32 ones";
  } else {
    EXPECT_EQ(outside, 0u) << "entries beyond fp32 accumulation's bound";
  }
  for (size_t i = 0; i < t.m; ++i)  // the padding between C's rows is untouched
    for (size_t j = t.n; j < ldc; ++j) ASSERT_EQ(c[i * ldc + j], c0[i * ldc + j]);
}

const Case kModelCases[] = {
    {false, true, 67, 45, 300, false},   // forward: inp (N, C) @ W (OC, C)^T
    {false, false, 67, 45, 300, false},  // backward: d inp = dout (N, OC) @ W (OC, C)
    {true, false, 45, 38, 257, true},    // backward: d W += dout^T (OC, N) @ inp (N, C)
    {false, true, 130, 129, 64, true},   // forward accumulating into C
    // accumulating over more rows of C than gemm_bf16's 2^18-float scratch chunk holds
    {true, false, 700, 400, 33, true},
    {false, false, 700, 400, 40, true},
};

class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) { setenv(name, value, 1); }
  ~ScopedEnv() { unsetenv(name_); }

 private:
  const char* name_;
};

TEST(GemmBf16, MatchesFloat64ReferenceWithinFp32AccumulationBound) {
  std::printf("%s\n", k::cpu::bf16_gemm_choice().note.c_str());
  for (const Case& t : kModelCases) check(t);
}

TEST(GemmBf16, BoundRejectsAProductOfUnroundedOperands) {
  check(kModelCases[0], /*against_unrounded=*/true);
}

TEST(GemmBf16, OffOverrideFallsBackToFp32WithANote) {
  ScopedEnv off("DSX_CPU_BF16_GEMM", "off");
  const k::cpu::Bf16GemmChoice choice = k::cpu::bf16_gemm_choice();
  EXPECT_FALSE(choice.native);
  EXPECT_NE(choice.note.find("DSX_CPU_BF16_GEMM=off"), std::string::npos) << choice.note;
  EXPECT_NE(choice.note.find("fp32"), std::string::npos) << choice.note;
  for (const Case& t : kModelCases) check(t);
}

TEST(GemmBf16, NativeOnlyWhereTheCpuHasAvx512Bf16) {
  const k::cpu::Bf16GemmChoice choice = k::cpu::bf16_gemm_choice();
  if (!__builtin_cpu_supports("avx512bf16")) {
    EXPECT_FALSE(choice.native) << choice.note;
  }
  if (choice.native) {
    EXPECT_NE(choice.note.find("oneDNN"), std::string::npos) << choice.note;
  }
}

// The bf16 classifier runs in vocabulary slices (bf16_matmul.cpp) to bound its operand copies.
// With V over two slices and a remainder, logits, d inp and the accumulated d wte must equal a
// float64 classifier on the same bf16-rounded operands within fp32 summation (~2^-24 a term, far
// below bf16's 2^-9), and the padded logit columns [V, Vp) stay untouched.
std::vector<float> normal_floats(size_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = normal(gen);
  return v;
}

std::vector<double> bf16_rounded(const std::vector<float>& v) {
  std::vector<uint16_t> bits(v.size());
  k::cpu::to_bf16(bits.data(), v.data(), v.size());
  std::vector<double> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = k::bf16_to_float(bits[i]);
  return out;
}

// max |got - want| / max |want|
double worst_relative(const std::vector<float>& got, const std::vector<double>& want) {
  double err = 0, scale = 0;
  for (size_t i = 0; i < got.size(); ++i)
    err = std::max(err, std::fabs(got[i] - want[i])), scale = std::max(scale, std::fabs(want[i]));
  return err / scale;
}

TEST(GemmBf16, ClassifierInVocabularySlicesMatchesFloat64) {
  const size_t N = 9;
  const int C = 16, V = 2 * 2048 + 131, Vp = V + 5;
  const auto inp = normal_floats(N * C, 1), wte = normal_floats(size_t(V) * C, 2);
  const auto dlogits = normal_floats(N * Vp, 3), dwte0 = normal_floats(size_t(V) * C, 4);
  std::vector<float> logits(N * Vp, 7.0f), dinp(N * C), dwte = dwte0;
  k::cpu::decoder_classifier_forward_bf16(logits.data(), inp.data(), wte.data(), N, C, V, Vp);
  k::cpu::decoder_classifier_backward_bf16(dinp.data(), dwte.data(), dlogits.data(), inp.data(),
                                           wte.data(), N, C, V, Vp);
  const auto inp64 = bf16_rounded(inp), wte64 = bf16_rounded(wte), dl64 = bf16_rounded(dlogits);
  std::vector<double> logits64(N * Vp, 7.0), dinp64(N * C), dwte64(dwte0.begin(), dwte0.end());
  k::cpu::decoder_classifier_forward(logits64.data(), inp64.data(), wte64.data(), N, C, V, Vp);
  k::cpu::decoder_classifier_backward(dinp64.data(), dwte64.data(), dl64.data(), inp64.data(),
                                      wte64.data(), N, C, V, Vp);
  EXPECT_LT(worst_relative(logits, logits64), 1e-6);
  EXPECT_LT(worst_relative(dinp, dinp64), 1e-5);
  EXPECT_LT(worst_relative(dwte, dwte64), 1e-6);
  for (size_t r = 0; r < N; ++r)
    for (int j = V; j < Vp; ++j) ASSERT_EQ(logits[r * Vp + j], 7.0f) << "padding written";
}

}  // namespace

namespace {

// The bf16 linear layer's backward takes the bias gradient (dout's column sums) in the pass that
// rounds dout: it must add the same fp32 sums, in the same order, as the fp32 layer's
// add_column_sums, onto what dbias held; d inp and d W match float64 on the rounded operands.
TEST(GemmBf16, LinearBackwardBiasGradientEqualsColumnSums) {
  const size_t N = 37;
  const int C = 24, OC = 72;
  const auto dout = normal_floats(N * OC, 5), inp = normal_floats(N * C, 6),
             w = normal_floats(size_t(OC) * C, 7);
  const auto db0 = normal_floats(OC, 8), dw0 = normal_floats(size_t(OC) * C, 9);
  std::vector<float> dinp(N * C), dw = dw0, db = db0, db_fp32 = db0;
  k::cpu::decoder_matmul_backward_bf16(dinp.data(), dw.data(), db.data(), dout.data(), inp.data(),
                                       w.data(), N, C, OC);
  k::cpu::add_column_sums(db_fp32.data(), dout.data(), N, OC, 0, OC);
  EXPECT_EQ(db, db_fp32);
  EXPECT_NE(db, db0);
  const auto dout64 = bf16_rounded(dout), inp64 = bf16_rounded(inp), w64 = bf16_rounded(w);
  std::vector<double> dinp64(N * C), dw64(dw0.begin(), dw0.end());
  k::cpu::decoder_matmul_backward<double>(dinp64.data(), dw64.data(), nullptr, dout64.data(),
                                          inp64.data(), w64.data(), N, C, OC);
  EXPECT_LT(worst_relative(dinp, dinp64), 1e-5);
  EXPECT_LT(worst_relative(dw, dw64), 1e-5);
}

}  // namespace

namespace {

// The fused head backward (cross-entropy into the classifier, bf16) must give what the two
// unfused steps give: the same dlogits arithmetic rounded the same way, so d inp and d wte equal
// decoder_crossentropy_backward + decoder_classifier_backward_bf16 to fp32 summation, an ignored
// target (-1) contributes nothing, and the logits are left untouched.
TEST(GemmBf16, FusedCrossEntropyClassifierBackwardEqualsTheTwoSteps) {
  const size_t N = 7;
  const int C = 16, V = 2048 + 77, Vp = V + 3;
  const auto inp = normal_floats(N * C, 11), wte = normal_floats(size_t(V) * C, 12);
  auto logits = normal_floats(N * Vp, 13);
  const std::vector<int32_t> targets = {3, 2047, 2048, -1, V - 1, 0, 1500};
  std::vector<float> lse(N), losses(N);
  k::cpu::decoder_crossentropy_forward(losses.data(), lse.data(), logits.data(), targets.data(), N,
                                       V, Vp);
  const std::vector<float> logits0 = logits;
  const float dloss = 0.125f;
  std::vector<float> dinp(N * C), dwte(size_t(V) * C, 0.5f);
  k::cpu::decoder_crossentropy_classifier_backward_bf16(dinp.data(), dwte.data(), logits.data(),
                                                        lse.data(), targets.data(), dloss,
                                                        inp.data(), wte.data(), N, C, V, Vp);
  EXPECT_EQ(logits, logits0) << "the fused backward wrote the logits";
  std::vector<float> dinp2(N * C), dwte2(size_t(V) * C, 0.5f), dlogits = logits0;
  k::cpu::decoder_crossentropy_backward(dlogits.data(), lse.data(), targets.data(), dloss, N, V,
                                        Vp);
  k::cpu::decoder_classifier_backward_bf16(dinp2.data(), dwte2.data(), dlogits.data(), inp.data(),
                                           wte.data(), N, C, V, Vp);
  const std::vector<double> dinp64(dinp2.begin(), dinp2.end()), dwte64(dwte2.begin(), dwte2.end());
  EXPECT_LT(worst_relative(dinp, dinp64), 1e-6);
  EXPECT_LT(worst_relative(dwte, dwte64), 1e-6);
  const double gap = worst_relative(dwte, std::vector<double>(size_t(V) * C, 0.5));
  EXPECT_GT(gap, 1e-3) << "d wte did not move: the test would pass on a no-op";
}

}  // namespace

namespace {

// The fused forward head (classifier + cross-entropy, bf16) writes the classifier's logits bit
// for bit, and lse and losses within fp32 rounding of the two-pass cross-entropy (its sums run
// slice by slice with a rescale, so only the order of additions differs); an ignored target (-1)
// is not counted and has loss 0. Targets in the first, second and last (partial) slice.
TEST(GemmBf16, FusedClassifierCrossEntropyForwardEqualsTheTwoSteps) {
  const size_t N = 6;
  const int C = 16, V = 2 * 2048 + 77, Vp = V + 3;
  auto inp = normal_floats(N * C, 14);
  for (size_t i = 0; i < C; ++i) inp[i] *= 8.0f;  // a row whose max sits far above the rest
  const auto wte = normal_floats(size_t(V) * C, 15);
  const std::vector<int32_t> targets = {3, 2047, 2048, -1, V - 1, 4100};
  std::vector<float> logits(N * Vp, 7.0f), losses(N), lse(N);
  const size_t counted = k::cpu::decoder_classifier_crossentropy_forward_bf16(
      logits.data(), losses.data(), lse.data(), inp.data(), wte.data(), targets.data(), N, C, V,
      Vp);
  std::vector<float> logits2(N * Vp, 7.0f), losses2(N), lse2(N);
  k::cpu::decoder_classifier_forward_bf16(logits2.data(), inp.data(), wte.data(), N, C, V, Vp);
  const size_t counted2 = k::cpu::decoder_crossentropy_forward(
      losses2.data(), lse2.data(), logits2.data(), targets.data(), N, V, Vp);
  EXPECT_EQ(logits, logits2);
  EXPECT_EQ(counted, 5u);
  EXPECT_EQ(counted, counted2);
  for (size_t r = 0; r < N; ++r) {
    EXPECT_NEAR(lse[r], lse2[r], 2e-6 * std::fabs(lse2[r]) + 1e-6) << "row " << r;
    EXPECT_NEAR(losses[r], losses2[r], 2e-6 * std::fabs(lse2[r]) + 1e-6) << "row " << r;
  }
  EXPECT_EQ(losses[3], 0.0f);
  EXPECT_GT(losses[0], 1.0f);
}

}  // namespace
