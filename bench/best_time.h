// The one timing rule of the kernel benchmarks: the best wall time of `reps` runs after warm-ups.
// Best, not median: on a shared machine the fastest run is the one least disturbed (the peers
// scripts time torch the same way).
#pragma once

#include <algorithm>
#include <chrono>

namespace dsx::bench {

// Milliseconds of the fastest of `reps` calls of f, after `warmups` untimed calls.
template <class F>
double best_ms(int reps, F&& f, int warmups = 1) {
  for (int w = 0; w < warmups; ++w) f();
  double best = 1e300;
  for (int r = 0; r < reps; ++r) {
    const auto start = std::chrono::steady_clock::now();
    f();
    best = std::min(best, std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  }
  return best;
}

}  // namespace dsx::bench
