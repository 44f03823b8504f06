// Finite differences in float64 for the gradient checks: central differences of a scalar function
// against the analytic gradient, reported as the worst relative error, and the random vectors and
// the scalar loss sum(out * R) the layer checks differentiate.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <functional>
#include <random>
#include <string>
#include <vector>

namespace dsx::test {

inline std::vector<double> random_vector(size_t n, uint64_t seed, double scale = 1.0) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(0.0, scale);
  std::vector<double> v(n);
  for (auto& x : v) x = normal(rng);
  return v;
}

// sum(a[i] * b[i]): a layer's output against random weights R, the loss a layer check differentiates.
inline double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

// Worst |analytic - numeric| / max(|numeric|, floor) over the checked elements of x, where
// numeric = (f(x + h e_i) - f(x - h e_i)) / 2h. Checks at most max_checks evenly spaced elements.
inline double gradient_error(const std::function<double()>& f, double* x, size_t n,
                             const double* analytic, size_t max_checks = 200, double floor = 1e-3,
                             double h = 1e-5) {
  double worst = 0;
  size_t stride = std::max<size_t>(1, n / max_checks);
  for (size_t i = 0; i < n; i += stride) {
    double saved = x[i];
    x[i] = saved + h;
    double up = f();
    x[i] = saved - h;
    double down = f();
    x[i] = saved;
    double numeric = (up - down) / (2 * h);
    worst = std::max(worst, std::abs(analytic[i] - numeric) / std::max(std::abs(numeric), floor));
  }
  return worst;
}

// Every element of `got` within rel * (1 + |want|) of `want`: a float computation against the
// double reference it shares its formula with.
template <class Got, class Want>
void expect_all_near(const Got& got, const Want& want, double rel, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_NEAR(got[i], want[i], rel * (1 + std::abs(want[i]))) << what << " element " << i;
}

}  // namespace dsx::test
