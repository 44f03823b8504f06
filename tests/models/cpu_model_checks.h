// Checks every CPU model family passes the same way (GPT2Cpu, LlamaCpu: `Cpu<T>` built as
// Cpu<T>(config, B, T, activation_checkpointing)), each given the family's small config:
// finite-difference gradients of the float64 model, gradient accumulation, the float model against the float64 one,
// activation checkpointing changing nothing but memory, reproducible initialisation, and the
// batches a model refuses.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "dsx/error.h"
#include "models/local_params.h"
#include "models/model.h"
#include "tests/models/gradcheck.h"
#include "tests/models/random_model.h"

namespace dsx::test {

// Every parameter tensor's gradient, the first checked(s) elements of each tensor s (some of them),
// against central differences of the mean loss of run's batch; returns the worst relative error.
template <class M>
double whole_model_gradient_error(RandomModel<M>& run, int B, int T,
                                  const std::function<size_t(const models::ParamSpec&)>& checked) {
  auto& [model, p, x, y] = run;
  model.forward(x.data(), y.data(), B, T, p);
  p.zero_grads();
  model.backward(p, p, 1.0f);
  auto f = [&] {
    model.forward(x.data(), y.data(), B, T, p);
    return static_cast<double>(model.mean_loss());
  };
  double worst = 0;
  for (const auto& s : model.params()) {
    double err = gradient_error(f, p.params() + s.offset, checked(s), p.grads() + s.offset, 40, 1e-4);
    EXPECT_LT(err, 1e-5) << s.name;
    worst = std::max(worst, err);
  }
  return worst;
}

// One backward of run's batch at grad_scale 1 from zeroed gradients, returned; then another at
// grad_scale 2 without zeroing, which accumulates: run.params then holds 3x the returned gradients.
template <class M>
std::vector<double> gradients_then_accumulated(RandomModel<M>& run, int B, int T) {
  auto& [model, p, x, y] = run;
  model.forward(x.data(), y.data(), B, T, p);
  p.zero_grads();
  model.backward(p, p, 1.0f);
  std::vector<double> g1(p.grads(), p.grads() + p.size());
  model.forward(x.data(), y.data(), B, T, p);
  model.backward(p, p, 2.0f);
  return g1;
}

// The float model against the float64 one on the same (float-rounded) random weights and a 2 x 8
// batch: loss within 1e-5, logits within 1e-4, every gradient within 1e-4 of the largest.
template <template <class> class Cpu, class Config>
void expect_float_agrees_with_float64(const Config& c) {
  Cpu<float> mf(c, 2, 8);
  Cpu<double> md(c, 2, 8);
  models::LocalParams<float> pf(mf);
  models::LocalParams<double> pd(md);
  randomize(pd, 14);
  for (size_t i = 0; i < pd.size(); ++i) pf.params()[i] = static_cast<float>(pd.params()[i]);
  for (size_t i = 0; i < pd.size(); ++i) pd.params()[i] = pf.params()[i];  // same rounded weights
  auto x = random_tokens(16, c.vocab_size, 15), y = random_tokens(16, c.vocab_size, 16);
  float lf = mf.forward(x.data(), y.data(), 2, 8, pf);
  md.forward(x.data(), y.data(), 2, 8, pd);
  EXPECT_NEAR(lf, md.mean_loss(), 1e-5 * md.mean_loss());
  auto zf = mf.logits(), zd = md.logits();
  for (size_t i = 0; i < zf.size(); ++i) ASSERT_NEAR(zf[i], zd[i], 1e-4 * (1 + std::abs(zd[i])));
  pf.zero_grads(), pd.zero_grads();
  mf.backward(pf, pf, 1.0f);
  md.backward(pd, pd, 1.0f);
  double gmax = 0, worst = 0;
  size_t at = 0;
  for (size_t i = 0; i < pd.size(); ++i) gmax = std::max(gmax, std::abs(pd.grads()[i]));
  for (size_t i = 0; i < pd.size(); ++i) {
    const double err = std::abs(pf.grads()[i] - pd.grads()[i]) / gmax;
    if (err > worst) worst = err, at = i;
  }
  EXPECT_LT(worst, 1e-4) << "gradient element " << at;
  std::printf("float vs float64 gradients: worst error %.2e of the largest gradient\n", worst);
}

// With activation checkpointing: fewer activation bytes, the same loss and the same gradient bits.
template <template <class> class Cpu, class Config>
void expect_checkpointing_changes_only_memory(const Config& c) {
  Cpu<float> plain(c, 2, 8), ckpt(c, 2, 8, /*activation_checkpointing=*/true);
  EXPECT_LT(ckpt.activation_bytes(), plain.activation_bytes());
  models::LocalParams<float> p(plain), q(ckpt);
  plain.init_params(p.params(), 11);
  std::copy(p.params(), p.params() + p.size(), q.params());
  auto x = random_tokens(16, c.vocab_size, 12), y = random_tokens(16, c.vocab_size, 13);
  EXPECT_EQ(plain.forward(x.data(), y.data(), 2, 8, p), ckpt.forward(x.data(), y.data(), 2, 8, q));
  p.zero_grads(), q.zero_grads();
  plain.backward(p, p, 1.0f);
  ckpt.backward(q, q, 1.0f);
  for (size_t i = 0; i < p.size(); ++i) ASSERT_EQ(p.grads()[i], q.grads()[i]) << i;
}

// A float model built for 4 x 32 batches, initialised into p from seed 42: its loss on random
// tokens (from token_seed and token_seed + 1) is near ln(vocabulary), and the initialisation is
// reproducible (seed 42 again makes the same values, seed 43 others).
inline void expect_initial_loss_is_ln_vocab(models::Model& model, models::LocalParams<float>& p,
                                            uint64_t token_seed) {
  model.init_params(p.params(), 42);
  const int V = model.vocab_size();
  auto x = random_tokens(4 * 32, V, token_seed), y = random_tokens(4 * 32, V, token_seed + 1);
  EXPECT_NEAR(model.forward(x.data(), y.data(), 4, 32, p), std::log(double(V)), 0.05);
  std::vector<float> again(model.num_params()), other(model.num_params());
  model.init_params(again.data(), 42);
  model.init_params(other.data(), 43);
  EXPECT_TRUE(std::equal(again.begin(), again.end(), p.params()));
  EXPECT_FALSE(std::equal(other.begin(), other.end(), p.params()));
}

// A model built for 2 x 8 batches over a vocabulary of 37 refuses an out-of-vocabulary token
// (a Format error naming its row and position), a batch of 3 rows, and backward after a forward
// without targets.
inline void expect_refuses_bad_batches(models::Model& model, models::LocalParams<float>& p) {
  std::vector<int32_t> x(16, 1), y(16, 1);
  x[9] = 37;  // vocabulary is [0, 37)
  try {
    model.forward(x.data(), y.data(), 2, 8, p);
    FAIL() << "out-of-vocabulary token accepted";
  } catch (const dsx::Error& e) {
    EXPECT_EQ(e.kind(), dsx::ErrorKind::Format);
    EXPECT_NE(std::string(e.what()).find("row 1, position 1"), std::string::npos) << e.what();
  }
  x[9] = 1;
  EXPECT_THROW(model.forward(x.data(), y.data(), 3, 8, p), dsx::Error);  // batch too large
  model.forward(x.data(), nullptr, 2, 8, p);
  EXPECT_THROW(model.backward(p, p, 1.0f), dsx::Error);  // no targets, no loss
}

}  // namespace dsx::test
