// The CPU's bf16 GEMM against a float64 reference of the same bf16-rounded operands, in the three
// transposition cases the models use (forward inp @ W^T, backward dout @ W and dout^T @ inp), on
// oneDNN's kernels where the CPU has them and on the fp32 fallback (DSX_CPU_BF16_GEMM=off).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <random>
#include <vector>

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

}  // namespace
