// Random inputs for the model tests: token batches, non-trivial parameters, and a float64 model
// set up on both (the setting of the gradient and reference checks).
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "models/local_params.h"
#include "tests/models/gradcheck.h"

namespace dsx::test {

// n tokens drawn uniformly from [0, vocab).
inline std::vector<int32_t> random_tokens(size_t n, int vocab, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<int32_t> t(n);
  for (auto& x : t) x = static_cast<int32_t>(rng() % vocab);
  return t;
}

// Random non-trivial parameters (norm weights away from 1, biases non-zero) for the checks.
template <class T>
void randomize(models::LocalParams<T>& p, uint64_t seed) {
  auto r = random_vector(p.size(), seed, 0.3);
  for (size_t i = 0; i < p.size(); ++i) p.params()[i] = static_cast<T>(r[i]);
}

// A float64 model (GPT2Cpu<double>, LlamaCpu<double>) of batch B x T on random parameters (from
// `seed`) with random inputs and targets (from seed + 1 and seed + 2).
template <class M>
struct RandomModel {
  template <class Config>
  RandomModel(const Config& c, int B, int T, uint64_t seed)
      : model(c, B, T),
        params(model),
        inputs(random_tokens(size_t(B) * T, c.vocab_size, seed + 1)),
        targets(random_tokens(size_t(B) * T, c.vocab_size, seed + 2)) {
    randomize(params, seed);
  }
  M model;
  models::LocalParams<double> params;
  std::vector<int32_t> inputs, targets;
};

}  // namespace dsx::test
