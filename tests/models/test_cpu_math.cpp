// The CPU model math under the GPT-2 layers: the OpenMP-sliced GEMM (kernels/cpu/gemm.h) against
// a float64 triple loop for every transpose and both slicing directions, and the vectorised exp,
// tanh and row loops (kernels/cpu/vector_math.h) and the SwiGLU loops that use them
// (kernels/cpu/llama_layers.h) against libm in float64 at every SIMD level.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/cpu/gemm.h"
#include "kernels/cpu/llama_layers.h"
#include "kernels/cpu/vector_math.h"
#include "kernels/simd.h"
#include "tests/models/gradcheck.h"

namespace kc = dsx::kernels::cpu;
using dsx::kernels::SimdLevel;
using dsx::test::random_vector;

namespace {

// C (m, n) = alpha op(A) op(B) + beta C in float64, row-major with leading dimensions.
void reference_gemm(bool ta, bool tb, size_t m, size_t n, size_t k, double alpha,
                    const std::vector<float>& a, size_t lda, const std::vector<float>& b,
                    size_t ldb, double beta, std::vector<double>& c, size_t ldc) {
  for (size_t i = 0; i < m; ++i)
    for (size_t j = 0; j < n; ++j) {
      double s = 0;
      for (size_t p = 0; p < k; ++p)
        s += double(ta ? a[p * lda + i] : a[i * lda + p]) * (tb ? b[j * ldb + p] : b[p * ldb + j]);
      c[i * ldc + j] = alpha * s + beta * c[i * ldc + j];
    }
}

std::vector<float> to_float(const std::vector<double>& v) { return {v.begin(), v.end()}; }

// Every level this CPU has, the scalar reference first.
std::vector<SimdLevel> levels() {
  std::vector<SimdLevel> out = {SimdLevel::Scalar};
  if (dsx::kernels::detected_simd_level() >= SimdLevel::Avx2) out.push_back(SimdLevel::Avx2);
  if (dsx::kernels::detected_simd_level() >= SimdLevel::Avx512) out.push_back(SimdLevel::Avx512);
  return out;
}

}  // namespace

// Shapes large enough to be split across threads, with sides that are not multiples of the
// 16-element slice alignment and leading dimensions wider than the matrices (as the attention
// heads' slices of qkv are). m > n slices rows, m < n slices columns.
TEST(CpuGemm, MatchesFloat64ForEveryTransposeAndSlicing) {
  omp_set_num_threads(2);
  struct Shape {
    size_t m, n, k;
  };
  for (Shape s : {Shape{301, 45, 333}, Shape{37, 517, 290}}) {
    for (int ta = 0; ta < 2; ++ta)
      for (int tb = 0; tb < 2; ++tb) {
        const size_t lda = (ta ? s.m : s.k) + 3, ldb = (tb ? s.k : s.n) + 5, ldc = s.n + 7;
        auto a = to_float(random_vector((ta ? s.k : s.m) * lda, 40));
        auto b = to_float(random_vector((tb ? s.n : s.k) * ldb, 41));
        auto c0 = random_vector(s.m * ldc, 42);
        std::vector<float> c(c0.begin(), c0.end());
        std::vector<double> expect(c.begin(), c.end());
        kc::gemm<float>(ta, tb, s.m, s.n, s.k, 0.5f, a.data(), lda, b.data(), ldb, 1.0f, c.data(),
                        ldc);
        reference_gemm(ta, tb, s.m, s.n, s.k, 0.5, a, lda, b, ldb, 1.0, expect, ldc);
        double worst = 0;
        for (size_t i = 0; i < s.m; ++i) {
          for (size_t j = 0; j < s.n; ++j)
            worst = std::max(worst, std::abs(c[i * ldc + j] - expect[i * ldc + j]) /
                                        (1 + std::abs(expect[i * ldc + j])));
          for (size_t j = s.n; j < ldc; ++j)
            ASSERT_EQ(c[i * ldc + j], float(c0[i * ldc + j])) << "padding written";
        }
        EXPECT_LT(worst, 1e-5) << "m " << s.m << " n " << s.n << " trans " << ta << tb;
      }
  }
  omp_set_num_threads(omp_get_num_procs());
}

TEST(CpuGemm, SlicedProductAgreesWithOneThread) {
  const size_t m = 260, n = 300, k = 200;
  auto a = to_float(random_vector(m * k, 43)), b = to_float(random_vector(n * k, 44));
  auto run = [&](int threads) {
    omp_set_num_threads(threads);
    std::vector<float> c(m * n, 0.0f);
    kc::gemm<float>(false, true, m, n, k, 1.0f, a.data(), k, b.data(), k, 0.0f, c.data(), n);
    return c;
  };
  auto one = run(1), two = run(2);
  omp_set_num_threads(omp_get_num_procs());
  // Each output element is one BLAS dot product in both runs; only the partition differs.
  for (size_t i = 0; i < one.size(); ++i)
    EXPECT_NEAR(one[i], two[i], 1e-5f * (1 + std::abs(one[i])));
}

// A product too small to split is held to one BLAS thread while it runs (not observable from
// here: the main job's throughput shows it, docs/benchmarks.md). What this checks: the result is
// right and the BLAS library's thread count is back afterwards for other callers.
TEST(CpuGemm, UnsplitProductKeepsBlasThreadsAsTheyWere) {
  const size_t m = 64, n = 256, k = 64;  // 2^20 multiply-adds: OpenBLAS alone would use its threads
  ASSERT_FALSE(m * n * k >= kc::kGemmParallelMacs);
  const int before = kc::blas_threads();
  auto a = to_float(random_vector(m * k, 45)), b = to_float(random_vector(n * k, 46));
  std::vector<float> c(m * n, 0.0f);
  kc::gemm<float>(false, true, m, n, k, 1.0f, a.data(), k, b.data(), k, 0.0f, c.data(), n);
  EXPECT_EQ(kc::blas_threads(), before);
  std::vector<double> ref(m * n, 0.0);
  reference_gemm(false, true, m, n, k, 1.0, a, k, b, k, 0.0, ref, n);
  for (size_t i = 0; i < c.size(); ++i) EXPECT_NEAR(c[i], ref[i], 1e-4 * (1 + std::abs(ref[i])));
}

TEST(CpuVectorMath, ExpAndTanhAgreeWithLibm) {
  double worst_exp = 0, worst_tanh = 0;
  // Down to -86: below about -87.3 the results are subnormal floats, with fewer digits.
  for (int i = -86000; i < 88000; ++i) {  // 88 itself rounds above the clamp
    float x = i * 1e-3f;
    worst_exp = std::max(worst_exp,
                         std::abs(kc::exp_approx(x) - std::exp(double(x))) / std::exp(double(x)));
    float u = i * 2e-4f;
    worst_tanh = std::max(worst_tanh, std::abs(kc::vtanh(u) - std::tanh(double(u))));
  }
  EXPECT_LT(worst_exp, 3e-7);   // 2.5 float ulp
  EXPECT_LT(worst_tanh, 3e-7);  // absolute
  // Far outside the range: clamped, finite, never NaN or infinite.
  EXPECT_LT(kc::exp_approx(-1000.0f), 1e-37f);
  EXPECT_TRUE(std::isfinite(kc::exp_approx(1000.0f)));
  EXPECT_EQ(kc::vtanh(50.0f), 1.0f);
  EXPECT_EQ(kc::vtanh(-50.0f), -1.0f);
}

TEST(CpuVectorMath, RowLoopsAgreeWithFloat64AtEveryLevel) {
  const size_t n = 50257;  // GPT-2's vocabulary: a tail after the last full vector
  auto xd = random_vector(n, 45, 4.0);
  xd[12345] = 30.0;  // the maximum, mid-row
  auto x = to_float(xd);
  // The argument x - shift is rounded to float first, as the kernels do.
  auto expected = [&](size_t i) { return std::exp(double(x[i] - 30.0f)); };
  double sum = 0;
  for (size_t i = 0; i < n; ++i) sum += expected(i);
  const SimdLevel saved = dsx::kernels::simd_level();
  for (SimdLevel level : levels()) {
    dsx::kernels::set_simd_level(level);
    SCOPED_TRACE(dsx::kernels::simd_level_name(level));
    EXPECT_EQ(kc::row_max(x.data(), n), 30.0f);
    EXPECT_NEAR(kc::row_sum_exp(x.data(), n, 30.0f), sum, 1e-5 * sum);
    auto y = x;
    EXPECT_NEAR(kc::row_exp_in_place(y.data(), n, 30.0f), sum, 1e-5 * sum);
    auto z = x;
    kc::row_exp_scale(z.data(), n, 30.0f, 0.25f);
    for (size_t i = 0; i < n; i += 97) {
      double e = expected(i);
      ASSERT_NEAR(y[i], e, 3e-7 * e) << i;
      ASSERT_NEAR(z[i], 0.25 * e, 3e-7 * e) << i;
    }
  }
  dsx::kernels::set_simd_level(saved);
}

// The float SwiGLU loops take the vectorised exp; the float64 ones keep libm's, so they are the
// reference. Gates far out on both sides must give silu's limits (0 and g), never NaN.
TEST(CpuVectorMath, SwigluAgreesWithFloat64AtEveryLevel) {
  const size_t n = 70001;  // split across threads, with a tail after the last full vector
  auto gate_d = random_vector(n, 46, 6.0), up_d = random_vector(n, 47, 1.0),
       dh_d = random_vector(n, 48, 1.0);
  gate_d[5] = -100.0, gate_d[6] = 100.0, gate_d[7] = 0.0;
  auto gate = to_float(gate_d), up = to_float(up_d), dh = to_float(dh_d);
  for (size_t i = 0; i < n; ++i) gate_d[i] = gate[i], up_d[i] = up[i], dh_d[i] = dh[i];
  std::vector<double> h_d(n), dgate_d(n), dup_d(n);
  kc::llama_swiglu_forward(h_d.data(), gate_d.data(), up_d.data(), n);
  kc::llama_swiglu_backward(dgate_d.data(), dup_d.data(), dh_d.data(), gate_d.data(), up_d.data(),
                            n);
  // Within 1e-6 of the size of the product's factors: exp's 2.5 ulp plus a few roundings, where
  // dgate's 1 + g (1 - s) cancels for negative g.
  auto expect_near = [&](const std::vector<float>& got, const std::vector<double>& want, auto size,
                         const char* what) {
    for (size_t i = 0; i < n; ++i)
      ASSERT_NEAR(got[i], want[i], 1e-6 * size(i) + 1e-30) << what << " at " << i;
  };
  const SimdLevel saved = dsx::kernels::simd_level();
  for (SimdLevel level : levels()) {
    dsx::kernels::set_simd_level(level);
    SCOPED_TRACE(dsx::kernels::simd_level_name(level));
    std::vector<float> h(n), dgate(dh), dup(n);
    kc::llama_swiglu_forward(h.data(), gate.data(), up.data(), n);
    kc::llama_swiglu_backward(dgate.data(), dup.data(), dgate.data(), gate.data(), up.data(),
                              n);  // dgate aliases dh
    expect_near(
        h, h_d, [&](size_t i) { return std::abs(gate_d[i] * up_d[i]); }, "h");
    expect_near(
        dgate, dgate_d,
        [&](size_t i) { return std::abs(dh_d[i] * up_d[i]) * (1 + std::abs(gate_d[i])); }, "dgate");
    expect_near(
        dup, dup_d, [&](size_t i) { return std::abs(dh_d[i] * gate_d[i]); }, "dup");
    EXPECT_NEAR(h[5], 0.0f, 1e-30f);
    EXPECT_FLOAT_EQ(h[6], 100.0f * up[6]);
  }
  dsx::kernels::set_simd_level(saved);
}
