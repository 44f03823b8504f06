// The shared element formulas of the decoder layers (kernels/decoder_math.h), which the CPU loops and
// the CUDA kernels both call, each against a float64 reference computed here independently:
// textbook LayerNorm, softmax and cross-entropy in double, and central differences for every
// backward formula. The float instantiations (the GPU's arithmetic) are checked against the same
// references.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/decoder_math.h"
#include "tests/models/gradcheck.h"

namespace dm = dsx::kernels::decoder;
using namespace dsx::test;  // gradcheck.h: dot, gradient_error, random_vector

namespace {

constexpr double kGradTol = 1e-6;

// ---- float64 references, written without the shared formulas ----

std::vector<double> reference_layernorm(const std::vector<double>& x, const std::vector<double>& w,
                                        const std::vector<double>& b) {
  const size_t n = x.size();
  double mean = 0, var = 0;
  for (double v : x) mean += v / n;
  for (double v : x) var += (v - mean) * (v - mean) / n;
  std::vector<double> y(n);
  for (size_t i = 0; i < n; ++i) y[i] = (x[i] - mean) / std::sqrt(var + 1e-5) * w[i] + b[i];
  return y;
}

std::vector<double> reference_softmax(const std::vector<double>& x) {
  long double sum = 0;  // no max subtracted: the inputs here are small
  for (double v : x) sum += std::exp(static_cast<long double>(v));
  std::vector<double> p(x.size());
  for (size_t i = 0; i < x.size(); ++i) p[i] = static_cast<double>(std::exp(static_cast<long double>(x[i])) / sum);
  return p;
}

// ---- the kernels' row procedure, through the shared formulas ----

struct LayerNormRow {
  std::vector<double> out, dinp;
  double mean, rstd;
};

template <class T>
LayerNormRow shared_layernorm(const std::vector<double>& xd, const std::vector<double>& wd,
                              const std::vector<double>& bd, const std::vector<double>& gd) {
  const int C = static_cast<int>(xd.size());
  std::vector<T> x(xd.begin(), xd.end()), w(wd.begin(), wd.end()), b(bd.begin(), bd.end());
  std::vector<T> g(gd.begin(), gd.end());
  T sum = 0, sq = 0;
  for (T v : x) sum += v;
  const T m = dm::layernorm_mean(sum, C);
  for (T v : x) sq += (v - m) * (v - m);
  const T s = dm::layernorm_rstd(sq, C);
  LayerNormRow row{std::vector<double>(C), std::vector<double>(C), double(m), double(s)};
  T dn_sum = 0, dnx_sum = 0;
  for (int i = 0; i < C; ++i) {
    const T xhat = dm::layernorm_xhat(x[i], m, s);
    row.out[i] = dm::layernorm_affine(xhat, w[i], b[i]);
    dn_sum += dm::layernorm_dnorm(g[i], w[i]);
    dnx_sum += dm::layernorm_dnorm(g[i], w[i]) * xhat;
  }
  const T dn_mean = dm::layernorm_mean(dn_sum, C), dnx_mean = dm::layernorm_mean(dnx_sum, C);
  for (int i = 0; i < C; ++i)
    row.dinp[i] = dm::layernorm_dinp_given(dm::layernorm_dnorm(g[i], w[i]), dm::layernorm_xhat(x[i], m, s),
                                           dn_mean, dnx_mean, s);
  return row;
}

template <class T>
std::vector<double> shared_softmax(const std::vector<double>& xd) {
  std::vector<T> x(xd.begin(), xd.end());
  const T mx = *std::max_element(x.begin(), x.end());
  T sum = 0;
  for (T& v : x) sum += v = std::exp(v - mx);
  const T inv = dm::softmax_inv_sum(sum);
  std::vector<double> p(x.size());
  for (size_t i = 0; i < x.size(); ++i) p[i] = x[i] * inv;
  return p;
}

template <class T>
std::vector<double> shared_softmax_backward(const std::vector<double>& pd, const std::vector<double>& dpd) {
  std::vector<T> p(pd.begin(), pd.end()), dp(dpd.begin(), dpd.end());
  T sum = 0;
  for (size_t i = 0; i < p.size(); ++i) sum += p[i] * dp[i];
  std::vector<double> d(p.size());
  for (size_t i = 0; i < p.size(); ++i) d[i] = dm::softmax_backward_given(p[i], dp[i], sum);
  return d;
}

struct CrossEntropyRow {
  double lse, loss;
  std::vector<double> dlogits;
};

template <class T>
CrossEntropyRow shared_crossentropy(const std::vector<double>& zd, int32_t y, double dloss_d) {
  std::vector<T> z(zd.begin(), zd.end());
  const T dloss = T(dloss_d);
  const T mx = *std::max_element(z.begin(), z.end());
  T sum = 0;
  for (T v : z) sum += std::exp(v - mx);
  const T lse = dm::logsumexp_given(mx, sum);
  CrossEntropyRow row{double(lse), double(dm::crossentropy_loss(lse, y, [&] { return z[y]; })),
                      std::vector<double>(z.size(), 0.0)};
  if (dm::crossentropy_counted(y))
    for (size_t i = 0; i < z.size(); ++i)
      row.dlogits[i] = dm::crossentropy_dlogit_given(std::exp(z[i] - lse) * dloss, int32_t(i) == y, dloss);
  return row;
}

}  // namespace

TEST(DecoderMath, LayerNormStatisticsOutputAndInputGradient) {
  for (int C : {1, 7, 64, 768}) {
    auto x = random_vector(C, 100 + C, 3.0), w = random_vector(C, 200 + C), b = random_vector(C, 300 + C);
    auto R = random_vector(C, 400 + C);
    auto row = shared_layernorm<double>(x, w, b, R);
    double mean = 0, var = 0;
    for (double v : x) mean += v;
    mean /= C;
    for (double v : x) var += (v - mean) * (v - mean);
    var /= C;
    EXPECT_NEAR(row.mean, mean, 1e-14 * (1 + std::abs(mean))) << C;
    EXPECT_NEAR(row.rstd, 1 / std::sqrt(var + 1e-5), 1e-13 / std::sqrt(var + 1e-5)) << C;
    auto ref = reference_layernorm(x, w, b);
    for (int i = 0; i < C; ++i) EXPECT_NEAR(row.out[i], ref[i], 1e-12 * (1 + std::abs(ref[i]))) << C << " " << i;
    // dinp is the gradient of sum(R * layernorm(x)) with respect to x (central differences lose
    // their digits in sums of 768 terms: checked up to GPT-2's head size).
    auto f = [&] { return dot(R, reference_layernorm(x, w, b)); };
    if (C <= 64) {
      EXPECT_LT(gradient_error(f, x.data(), x.size(), row.dinp.data()), kGradTol) << C;
    }
    // The float instantiation, as the GPU runs it: within fp32 roundings of the reference.
    auto rowf = shared_layernorm<float>(x, w, b, R);
    expect_all_near(rowf.out, ref, 2e-5, "C " + std::to_string(C));
    expect_all_near(rowf.dinp, row.dinp, 2e-5, "C " + std::to_string(C));
  }
}

TEST(DecoderMath, LayerNormOfAConstantRowIsTheBias) {
  // Variance 0: rstd = 1 / sqrt(eps), x_hat = 0, so the output is the bias and
  // dinp = rstd * (dnorm - mean(dnorm)).
  std::vector<double> x(5, 2.5), w = random_vector(5, 1), b = random_vector(5, 2), g = random_vector(5, 3);
  auto row = shared_layernorm<double>(x, w, b, g);
  EXPECT_DOUBLE_EQ(row.rstd, 1 / std::sqrt(1e-5));
  double dnorm_mean = 0;
  for (int i = 0; i < 5; ++i) dnorm_mean += g[i] * w[i] / 5;
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(row.out[i], b[i]);
    const double expect = (g[i] * w[i] - dnorm_mean) / std::sqrt(1e-5);
    EXPECT_NEAR(row.dinp[i], expect, 1e-12 * (1 + std::abs(expect)));
  }
}

TEST(DecoderMath, SoftmaxForwardAndBackward) {
  for (int n : {1, 2, 9, 300}) {
    auto x = random_vector(n, 500 + n, 2.0), dp = random_vector(n, 600 + n);
    std::vector<double> x_as_float(x.begin(), x.end());
    for (double& v : x_as_float) v = static_cast<float>(v);
    auto ref = reference_softmax(x), ref_f = reference_softmax(x_as_float);
    auto p = shared_softmax<double>(x), pf = shared_softmax<float>(x);
    for (int i = 0; i < n; ++i) {
      EXPECT_NEAR(p[i], ref[i], 1e-14) << n << " " << i;
      // fp32 roundings: a few per element, and up to one per term in the row's sum
      EXPECT_NEAR(pf[i], ref_f[i], (4 + n) * 0x1p-24 * ref_f[i]) << n << " " << i;
    }
    // d/dx of sum(dp * softmax(x)), against central differences of the reference softmax.
    auto d = shared_softmax_backward<double>(p, dp);
    auto f = [&] { return dot(dp, reference_softmax(x)); };
    EXPECT_LT(gradient_error(f, x.data(), x.size(), d.data()), kGradTol) << n;
    auto df = shared_softmax_backward<float>(pf, dp);
    for (int i = 0; i < n; ++i) EXPECT_NEAR(df[i], d[i], 1e-5 * (1 + std::abs(d[i]))) << n << " " << i;
  }
}

TEST(DecoderMath, SoftmaxSubtractsTheMaxSoLargeScoresStayFinite) {
  // exp(1000) overflows even in double; shifted by the max the row is exact.
  std::vector<double> x = {1000.0, 999.0, 998.0}, shifted = {2.0, 1.0, 0.0};
  auto p = shared_softmax<float>(x), ref = reference_softmax(shifted);
  for (int i = 0; i < 3; ++i) EXPECT_NEAR(p[i], ref[i], 1e-7);
}

TEST(DecoderMath, AttentionScaleIsOneOverSqrtHeadSize) {
  EXPECT_EQ(dm::attention_scale<double>(64), 0.125);
  EXPECT_EQ(dm::attention_scale<float>(64), 0.125f);
  for (int hs : {1, 3, 48, 80, 128})
    EXPECT_NEAR(dm::attention_scale<float>(hs), 1 / std::sqrt(double(hs)), 1e-7 / std::sqrt(double(hs))) << hs;
}

TEST(DecoderMath, CrossEntropyLossAndGradient) {
  const double dloss = 0.37;
  for (int V : {2, 11, 1000}) {
    auto z = random_vector(V, 700 + V, 3.0);
    for (int32_t y : {0, V / 2, V - 1}) {
      auto row = shared_crossentropy<double>(z, y, dloss);
      // loss = -log p_y, p the softmax in double; lse = log sum exp(z).
      auto p = reference_softmax(z);
      long double sum = 0;
      for (double v : z) sum += std::exp(static_cast<long double>(v));
      EXPECT_NEAR(row.lse, static_cast<double>(std::log(sum)), 1e-13 * (1 + std::abs(row.lse)));
      EXPECT_NEAR(row.loss, -std::log(p[y]), 1e-12 * (1 + row.loss)) << V << " " << y;
      for (int i = 0; i < V; ++i)
        EXPECT_NEAR(row.dlogits[i], (p[i] - (i == y)) * dloss, 1e-14) << V << " " << y << " " << i;
      // The gradient of dloss * loss, by central differences of the reference.
      auto f = [&] { return -dloss * std::log(reference_softmax(z)[y]); };
      EXPECT_LT(gradient_error(f, z.data(), z.size(), row.dlogits.data()), kGradTol) << V << " " << y;
      auto rowf = shared_crossentropy<float>(z, y, dloss);
      EXPECT_NEAR(rowf.loss, row.loss, 4e-6 * (1 + std::abs(row.lse)));
      for (int i = 0; i < V; ++i) EXPECT_NEAR(rowf.dlogits[i], row.dlogits[i], 1e-7) << V << " " << i;
    }
  }
}

TEST(DecoderMath, CrossEntropyIgnoresNegativeTargets) {
  EXPECT_TRUE(dm::crossentropy_counted(0));
  EXPECT_FALSE(dm::crossentropy_counted(-1));
  EXPECT_FALSE(dm::crossentropy_counted(-100));
  bool read = false;
  EXPECT_EQ(dm::crossentropy_loss(3.5f, -1, [&] { read = true; return 1.0f; }), 0.0f);
  EXPECT_FALSE(read);  // the ignored row's target logit is never read (index -1)
  auto row = shared_crossentropy<double>(random_vector(6, 9), -1, 1.0);
  EXPECT_EQ(row.loss, 0.0);
  for (double d : row.dlogits) EXPECT_EQ(d, 0.0);
}

TEST(DecoderMath, CrossEntropyGradientOffTheTargetIsTheScaledProbability) {
  // The CPU scales exp(z - lse) by dloss for the whole row and corrects only the target: the
  // shared formula leaves every other entry's bits as they are.
  for (float pd : {0.0f, 1e-30f, 0.25f, 0.999f}) {
    EXPECT_EQ(dm::crossentropy_dlogit_given(pd, false, -2.0f), pd);
    EXPECT_EQ(dm::crossentropy_dlogit_given(pd, true, 2.0f), pd - 2.0f);
  }
}
