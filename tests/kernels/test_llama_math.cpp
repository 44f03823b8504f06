// The shared element formulas of the Llama-family layers (kernels/llama_math.h), each against a
// float64 reference written here without them (RMSNorm as transformers writes it, RoPE as
// x*cos + rotate_half(x)*sin over duplicated cos/sin, silu(gate)*up), and every backward formula
// against central differences of that reference. The float instantiations (the GPU's arithmetic)
// are checked against the same references.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kernels/llama_math.h"
#include "tests/models/gradcheck.h"

namespace lm = dsx::kernels::llama;
using namespace dsx::test;  // gradcheck.h: dot, gradient_error, random_vector

namespace {

constexpr double kGradTol = 1e-6;

// ---- float64 references, written without the shared formulas ----

std::vector<double> reference_rmsnorm(const std::vector<double>& x, const std::vector<double>& w, double eps) {
  double ms = 0;
  for (double v : x) ms += v * v / x.size();
  std::vector<double> y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = w[i] * (x[i] / std::sqrt(ms + eps));
  return y;
}

// cat(-x[D/2:], x[:D/2])
std::vector<double> rotate_half(const std::vector<double>& x) {
  const size_t h = x.size() / 2;
  std::vector<double> r(x.size());
  for (size_t j = 0; j < h; ++j) r[j] = -x[j + h], r[j + h] = x[j];
  return r;
}

// x * cat(cos, cos) + rotate_half(x) * cat(sin, sin), angles pos * inv_freq.
std::vector<double> reference_rope(const std::vector<double>& x, const std::vector<double>& angle) {
  const size_t h = x.size() / 2;
  auto r = rotate_half(x);
  std::vector<double> y(x.size());
  for (size_t j = 0; j < x.size(); ++j) y[j] = x[j] * std::cos(angle[j % h]) + r[j] * std::sin(angle[j % h]);
  return y;
}

double reference_swiglu(double g, double u) { return g / (1 + std::exp(-g)) * u; }

// ---- the kernels' row procedure, through the shared formulas ----

template <class T>
struct RmsRow {
  std::vector<double> out, dinp, dweight;
};

template <class T>
RmsRow<T> shared_rmsnorm(const std::vector<double>& xd, const std::vector<double>& wd, const std::vector<double>& gd,
                         double eps) {
  const int C = static_cast<int>(xd.size());
  std::vector<T> x(xd.begin(), xd.end()), w(wd.begin(), wd.end()), g(gd.begin(), gd.end());
  T sq = 0;
  for (T v : x) sq += v * v;
  const T s = lm::rmsnorm_rstd(sq, C, T(eps));
  RmsRow<T> row{std::vector<double>(C), std::vector<double>(C), std::vector<double>(C)};
  T dot_sum = 0;
  for (int i = 0; i < C; ++i) {
    const T xhat = lm::rmsnorm_xhat(x[i], s);
    row.out[i] = lm::rmsnorm_out(xhat, w[i]);
    row.dweight[i] = g[i] * xhat;
    dot_sum += lm::rmsnorm_dnorm(g[i], w[i]) * xhat;
  }
  for (int i = 0; i < C; ++i)
    row.dinp[i] = lm::rmsnorm_dinp_given(lm::rmsnorm_dnorm(g[i], w[i]), lm::rmsnorm_xhat(x[i], s), dot_sum / T(C), s);
  return row;
}

template <class T>
std::vector<double> shared_rope(const std::vector<double>& xd, const std::vector<double>& angle, bool backward) {
  const int D = static_cast<int>(xd.size());
  std::vector<T> x(xd.begin(), xd.end()), c(D / 2), s(D / 2), out(D);
  for (int j = 0; j < D / 2; ++j) c[j] = T(std::cos(angle[j])), s[j] = T(std::sin(angle[j]));
  if (backward)
    lm::rope_backward(out.data(), x.data(), c.data(), s.data(), D);
  else
    lm::rope_forward(out.data(), x.data(), c.data(), s.data(), D);
  return {out.begin(), out.end()};
}

}  // namespace

TEST(LlamaMath, RmsNormOutputAndGradients) {
  for (int C : {1, 8, 64, 512}) {
    auto x = random_vector(C, 10 + C, 2.0), w = random_vector(C, 20 + C), g = random_vector(C, 30 + C);
    for (double eps : {1e-5, 1e-6}) {
      auto row = shared_rmsnorm<double>(x, w, g, eps);
      auto ref = reference_rmsnorm(x, w, eps);
      for (int i = 0; i < C; ++i) EXPECT_NEAR(row.out[i], ref[i], 1e-13 * (1 + std::abs(ref[i]))) << C << " " << i;
      // dinp and dweight: gradients of sum(g * rmsnorm(x, w)).
      if (C <= 64) {
        auto f = [&] { return dot(g, reference_rmsnorm(x, w, eps)); };
        EXPECT_LT(gradient_error(f, x.data(), x.size(), row.dinp.data()), kGradTol) << C;
        EXPECT_LT(gradient_error(f, w.data(), w.size(), row.dweight.data()), kGradTol) << C;
      }
      auto rowf = shared_rmsnorm<float>(x, w, g, eps);
      expect_all_near(rowf.out, ref, 1e-5, "C " + std::to_string(C));
      expect_all_near(rowf.dinp, row.dinp, 1e-5, "C " + std::to_string(C));
    }
  }
}

TEST(LlamaMath, RmsNormOfAZeroRowIsZeroWithEpsilonInTheGradient) {
  // mean(x^2) = 0: r = 1/sqrt(eps), the output 0 and dinp = r * g * w (the x_hat term vanishes).
  std::vector<double> x(6, 0.0), w = random_vector(6, 1), g = random_vector(6, 2);
  auto row = shared_rmsnorm<double>(x, w, g, 1e-6);
  for (int i = 0; i < 6; ++i) {
    EXPECT_EQ(row.out[i], 0.0);
    EXPECT_NEAR(row.dinp[i], g[i] * w[i] / std::sqrt(1e-6), 1e-9 * std::abs(g[i] * w[i] / std::sqrt(1e-6)));
  }
}

TEST(LlamaMath, RopeRotatesHalvesAsTransformersDoes) {
  for (int D : {2, 8, 64, 128}) {
    auto x = random_vector(D, 40 + D), dout = random_vector(D, 50 + D);
    std::vector<double> angle(D / 2);
    for (int j = 0; j < D / 2; ++j) angle[j] = 37.0 / std::pow(10000.0, 2.0 * j / D);  // position 37
    auto ref = reference_rope(x, angle);
    auto out = shared_rope<double>(x, angle, false);
    double norm_in = 0, norm_out = 0;
    for (int j = 0; j < D; ++j) {
      EXPECT_NEAR(out[j], ref[j], 1e-14 * (1 + std::abs(ref[j]))) << D << " " << j;
      norm_in += x[j] * x[j], norm_out += out[j] * out[j];
    }
    EXPECT_NEAR(norm_out, norm_in, 1e-12 * norm_in) << "a rotation keeps the length";
    // backward is the gradient of sum(dout * rope(x)).
    auto din = shared_rope<double>(dout, angle, true);
    auto f = [&] { return dot(dout, reference_rope(x, angle)); };
    EXPECT_LT(gradient_error(f, x.data(), x.size(), din.data()), kGradTol) << D;
    // and undoes the forward: backward(forward(x)) = x.
    auto back = shared_rope<double>(out, angle, true);
    for (int j = 0; j < D; ++j) EXPECT_NEAR(back[j], x[j], 1e-13 * (1 + std::abs(x[j])));
    auto outf = shared_rope<float>(x, angle, false), dinf = shared_rope<float>(dout, angle, true);
    for (int j = 0; j < D; ++j) {
      EXPECT_NEAR(outf[j], ref[j], 1e-6 * (1 + std::abs(ref[j])));
      EXPECT_NEAR(dinf[j], din[j], 1e-6 * (1 + std::abs(din[j])));
    }
  }
}

TEST(LlamaMath, RopePairsChannelJWithJPlusHalf) {
  // D = 4, angle pi/2 at frequency 0 and 0 at frequency 1: channel 0 takes -x[2], channel 2 takes
  // x[0], channels 1 and 3 stay.
  std::vector<double> x = {1, 2, 3, 4}, angle = {std::acos(-1.0) / 2, 0.0};
  auto out = shared_rope<double>(x, angle, false);
  EXPECT_NEAR(out[0], -3, 1e-15);
  EXPECT_NEAR(out[1], 2, 1e-15);
  EXPECT_NEAR(out[2], 1, 1e-15);
  EXPECT_NEAR(out[3], 4, 1e-15);
}

TEST(LlamaMath, SwigluForwardAndBackward) {
  auto gate = random_vector(200, 60, 4.0), up = random_vector(200, 61, 2.0), dh = random_vector(200, 62);
  for (size_t i = 0; i < gate.size(); ++i) {
    const double g = gate[i], u = up[i], ref = reference_swiglu(g, u);
    EXPECT_NEAR(lm::swiglu(g, u), ref, 1e-14 * (1 + std::abs(ref)));
    EXPECT_NEAR(lm::swiglu(float(g), float(u)), ref, 1e-6 * (1 + std::abs(ref)));
    const double h = 1e-6, s = lm::sigmoid(g);
    const double num_dg = (reference_swiglu(g + h, u) - reference_swiglu(g - h, u)) / (2 * h) * dh[i];
    const double num_du = (reference_swiglu(g, u + h) - reference_swiglu(g, u - h)) / (2 * h) * dh[i];
    EXPECT_NEAR(lm::swiglu_dgate_given(dh[i], g, u, s), num_dg, 1e-7 * (1 + std::abs(num_dg))) << g;
    EXPECT_NEAR(lm::swiglu_dup_given(dh[i], g, s), num_du, 1e-7 * (1 + std::abs(num_du))) << g;
    const float sf = lm::sigmoid(float(g));
    EXPECT_NEAR(lm::swiglu_dgate_given(float(dh[i]), float(g), float(u), sf), num_dg, 1e-5 * (1 + std::abs(num_dg)));
  }
}

TEST(LlamaMath, SigmoidSaturatesWithoutNaN) {
  // exp(-g) overflows to inf for g < -88 in float: sigmoid 0, silu 0, gradient 0, not NaN.
  for (float g : {-1000.0f, -100.0f, 100.0f, 1000.0f}) {
    const float s = lm::sigmoid(g);
    EXPECT_EQ(s, g < 0 ? 0.0f : 1.0f) << g;
    EXPECT_FALSE(std::isnan(lm::swiglu(g, 2.0f))) << g;
    EXPECT_FALSE(std::isnan(lm::swiglu_dgate_given(1.0f, g, 2.0f, s))) << g;
  }
  EXPECT_EQ(lm::swiglu(-1000.0f, 2.0f), -0.0f);
  EXPECT_EQ(lm::swiglu(1000.0f, 2.0f), 2000.0f);
}
