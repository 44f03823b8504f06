// Finite differences in float64 for the GPT-2 gradient checks: central differences of a scalar
// function against the analytic gradient, reported as the worst relative error.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <functional>
#include <random>
#include <vector>

namespace dsx::test {

inline std::vector<double> random_vector(size_t n, uint64_t seed, double scale = 1.0) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(0.0, scale);
  std::vector<double> v(n);
  for (auto& x : v) x = normal(rng);
  return v;
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

}  // namespace dsx::test
