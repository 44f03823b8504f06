// Seeded shuffles for the data loaders: the same order on every rank and with every standard
// library (our own index draw over mt19937_64), recomputable from (seed, epoch) so a saved
// position resumes exactly.
#pragma once

#include <cstdint>
#include <numeric>
#include <random>
#include <utility>
#include <vector>

namespace dsx::models {

// Fisher-Yates over [0, n).
inline std::vector<uint64_t> seeded_permutation(uint64_t n, uint64_t seed) {
  std::vector<uint64_t> p(n);
  std::iota(p.begin(), p.end(), 0);
  std::mt19937_64 rng(seed);
  for (uint64_t i = n; i > 1; --i) {
    std::swap(p[i - 1], p[rng() % i]);
  }
  return p;
}

// Two numbers into one seed (seed and epoch, say).
inline uint64_t mix_seed(uint64_t a, uint64_t b) {
  return a * 0x9E3779B97F4A7C15ull ^ (b + 0x632BE59BD9B4E019ull);
}

}  // namespace dsx::models
