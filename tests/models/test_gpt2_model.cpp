// The GPT-2 CPU model as a whole: float64 finite-difference check of every parameter's gradient,
// the loss at initialisation, overfitting one batch, activation checkpointing, float vs float64,
// the layer-by-layer contract with ParamAccess / GradSink, and bad input.
#include <cblas.h>
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <vector>

#include "dsx/error.h"
#include "models/gpt2/factory.h"
#include "models/gpt2/gpt2_cpu.h"
#include "models/local_params.h"
#include "tests/models/gradcheck.h"
#include "tests/models/plain_adamw.h"
#include "tests/models/protocol_checker.h"
#include "tests/models/random_model.h"

using namespace dsx::models;
using dsx::test::random_tokens;
using dsx::test::randomize;
using dsx::test::RandomModel;

namespace {

GPT2Config micro_config() {
  GPT2Config c;
  c.max_seq_len = 8, c.vocab_size = 37, c.padded_vocab_size = padded_vocab(37);
  c.num_layers = 2, c.num_heads = 2, c.channels = 8;
  return c;
}

}  // namespace

TEST(Gpt2Model, ParamLayoutMatchesLlmc) {
  auto c = gpt2_preset("gpt2-124M");
  GPT2Cpu<float> model(c, 1, 8);
  EXPECT_EQ(model.num_params(), 124475904u);  // llm.c's count with the padded vocabulary
  EXPECT_EQ(model.num_layers(), 14);
  EXPECT_EQ(model.params().size(), 2u + 12u * 12u + 2u);
  EXPECT_EQ(model.params()[gpt2_param_index(c, kQkvw, 3)].name, "h.3.attn.c_attn.weight");
  EXPECT_EQ(model.params()[gpt2_param_index(c, kLnfb, 0)].name, "ln_f.bias");
  EXPECT_FALSE(model.params()[gpt2_param_index(c, kLn2w, 0)].decay);
  EXPECT_TRUE(model.params()[gpt2_param_index(c, kFcprojw, 11)].decay);
}

TEST(Gpt2Model, WholeModelGradientsMatchFiniteDifferences) {
  auto c = micro_config();
  const int B = 2, T = 5;
  RandomModel<GPT2Cpu<double>> run(c, B, T, 1);
  auto& [model, p, x, y] = run;
  y[3] = -1;  // an ignored position
  model.forward(x.data(), y.data(), B, T, p);
  p.zero_grads();
  model.backward(p, p, 1.0f);
  auto f = [&] {
    model.forward(x.data(), y.data(), B, T, p);
    return static_cast<double>(model.mean_loss());
  };
  // Every parameter tensor, some elements of each (the padded vocabulary rows excluded).
  for (const auto& s : model.params()) {
    size_t n = s.name == "wte.weight" ? static_cast<size_t>(c.vocab_size) * c.channels : s.numel;
    double err = dsx::test::gradient_error(f, p.params() + s.offset, n, p.grads() + s.offset, 40, 1e-4);
    EXPECT_LT(err, 1e-5) << s.name;
  }
  // Padded vocabulary rows never receive gradient.
  const auto& wte = model.params()[0];
  for (size_t i = static_cast<size_t>(c.vocab_size) * c.channels; i < wte.numel; ++i)
    ASSERT_EQ(p.grads()[wte.offset + i], 0.0);
}

TEST(Gpt2Model, GradScaleScalesGradientsAndGradientsAccumulate) {
  auto c = micro_config();
  RandomModel<GPT2Cpu<double>> run(c, 1, 6, 4);
  auto& [model, p, x, y] = run;
  model.forward(x.data(), y.data(), 1, 6, p);
  p.zero_grads();
  model.backward(p, p, 1.0f);
  std::vector<double> g1(p.grads(), p.grads() + p.size());
  model.forward(x.data(), y.data(), 1, 6, p);
  model.backward(p, p, 2.0f);  // accumulates: total 3x
  for (size_t i = 0; i < p.size(); i += 7) EXPECT_NEAR(p.grads()[i], 3 * g1[i], 1e-12 + 1e-10 * std::abs(g1[i]));
}

TEST(Gpt2Model, InitialLossIsLnVocab) {
  auto c = gpt2_preset("byte-tiny");
  GPT2Cpu<float> model(c, 4, 32);
  LocalParams<float> p(model);
  model.init_params(p.params(), 42);
  auto x = random_tokens(4 * 32, c.vocab_size, 7), y = random_tokens(4 * 32, c.vocab_size, 8);
  float loss = model.forward(x.data(), y.data(), 4, 32, p);
  EXPECT_NEAR(loss, std::log(256.0), 0.05);
  // Initialisation is reproducible from the seed and differs between seeds.
  std::vector<float> again(model.num_params()), other(model.num_params());
  model.init_params(again.data(), 42);
  model.init_params(other.data(), 43);
  EXPECT_TRUE(std::equal(again.begin(), again.end(), p.params()));
  EXPECT_FALSE(std::equal(other.begin(), other.end(), p.params()));
}

TEST(Gpt2Model, OverfitsOneBatch) {
  openblas_set_num_threads(1);  // tiny matmuls: BLAS threads only add waiting
  auto c = gpt2_preset("byte-tiny");
  const int B = 4, T = 24;
  GPT2Cpu<float> model(c, B, T);
  LocalParams<float> p(model);
  model.init_params(p.params(), 1);
  auto x = random_tokens(B * T, c.vocab_size, 9), y = random_tokens(B * T, c.vocab_size, 10);
  dsx::test::PlainAdamW adam(p.size(), 3e-3f);
  float first = 0, last = 0;
  for (int step = 0; step < 150; ++step) {
    last = model.forward(x.data(), y.data(), B, T, p);
    if (step == 0) first = last;
    p.zero_grads();
    model.backward(p, p, 1.0f);
    adam.step(p.params(), p.grads(), model.params());
  }
  EXPECT_GT(first, 5.0f);
  EXPECT_LT(last, 0.1f) << "random targets memorised from " << first;
}

TEST(Gpt2Model, ActivationCheckpointingGivesIdenticalGradients) {
  auto c = micro_config();
  GPT2Cpu<float> plain(c, 2, 8), ckpt(c, 2, 8, /*activation_checkpointing=*/true);
  LocalParams<float> p(plain), q(ckpt);
  plain.init_params(p.params(), 11);
  std::copy(p.params(), p.params() + p.size(), q.params());
  auto x = random_tokens(16, c.vocab_size, 12), y = random_tokens(16, c.vocab_size, 13);
  EXPECT_EQ(plain.forward(x.data(), y.data(), 2, 8, p), ckpt.forward(x.data(), y.data(), 2, 8, q));
  p.zero_grads(), q.zero_grads();
  plain.backward(p, p, 1.0f);
  ckpt.backward(q, q, 1.0f);
  for (size_t i = 0; i < p.size(); ++i) ASSERT_EQ(p.grads()[i], q.grads()[i]) << i;
}

TEST(Gpt2Model, FloatModelAgreesWithFloat64Reference) {
  auto c = micro_config();
  GPT2Cpu<float> mf(c, 2, 8);
  GPT2Cpu<double> md(c, 2, 8);
  LocalParams<float> pf(mf);
  LocalParams<double> pd(md);
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
  double gmax = 0;
  for (size_t i = 0; i < pd.size(); ++i) gmax = std::max(gmax, std::abs(pd.grads()[i]));
  for (size_t i = 0; i < pd.size(); ++i) ASSERT_NEAR(pf.grads()[i], pd.grads()[i], 1e-4 * gmax) << i;
}

TEST(Gpt2Model, FollowsTheLayerProtocol) {
  auto c = micro_config();
  GPT2Cpu<float> model(c, 1, 8, true);
  LocalParams<float> p(model);
  model.init_params(p.params(), 3);
  dsx::test::ProtocolChecker checker(p, p, model);
  auto x = random_tokens(8, c.vocab_size, 17);
  model.forward(x.data(), x.data(), 1, 8, checker);
  EXPECT_TRUE(checker.nothing_acquired());
  model.backward(checker, checker, 1.0f);
  EXPECT_TRUE(checker.nothing_acquired());
  EXPECT_EQ(checker.order, (std::vector<int>{3, 2, 1, 0}));  // head, blocks top-down, embedding
}

TEST(Gpt2Model, RejectsBadInput) {
  auto c = micro_config();
  GPT2Cpu<float> model(c, 2, 8);
  LocalParams<float> p(model);
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
  EXPECT_THROW(GPT2Cpu<float>(c, 1, 9), dsx::Error);                    // beyond the context
  model.forward(x.data(), nullptr, 2, 8, p);
  EXPECT_THROW(model.backward(p, p, 1.0f), dsx::Error);  // no targets, no loss
  EXPECT_THROW(gpt2_preset("gpt2-125M"), dsx::Error);
}

TEST(Gpt2Model, FactoryBuildsWhatThisBuildCanRun) {
  auto c = micro_config();
  GPT2Options o;
  o.max_batch = 2, o.max_seq = 8, o.activation_checkpointing = true;
  auto model = make_gpt2(c, o);
  EXPECT_FALSE(model->on_device());
  EXPECT_EQ(model->num_layers(), 4);
  o.dtype = dsx::kernels::DType::BF16;
  EXPECT_THROW(make_gpt2(c, o), dsx::Error);  // no bf16 CPU model
#ifndef DSX_HAVE_CUDA
  o.cuda = true;
  o.dtype = dsx::kernels::DType::F32;
  EXPECT_THROW(make_gpt2(c, o), dsx::Error);
#endif
}
