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
#include "tests/models/cpu_model_checks.h"
#include "tests/models/plain_adamw.h"
#include "tests/models/protocol_checker.h"
#include "tests/models/random_model.h"

using namespace dsx::models;
using namespace dsx::test;

namespace {

GPT2Config micro_config() {
  return gpt2_config(/*max_seq_len=*/8, /*vocab_size=*/37, /*num_layers=*/2, /*num_heads=*/2, /*channels=*/8);
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
  // Every parameter tensor, some elements of each (the padded vocabulary rows excluded).
  whole_model_gradient_error(run, B, T, [&](const ParamSpec& s) {
    return s.name == "wte.weight" ? static_cast<size_t>(c.vocab_size) * c.channels : s.numel;
  });
  // Padded vocabulary rows never receive gradient.
  const auto& wte = model.params()[0];
  for (size_t i = static_cast<size_t>(c.vocab_size) * c.channels; i < wte.numel; ++i)
    ASSERT_EQ(p.grads()[wte.offset + i], 0.0);
}

TEST(Gpt2Model, GradScaleScalesGradientsAndGradientsAccumulate) {
  auto c = micro_config();
  RandomModel<GPT2Cpu<double>> run(c, 1, 6, 4);
  const auto g1 = gradients_then_accumulated(run, 1, 6);
  const auto& p = run.params;
  for (size_t i = 0; i < p.size(); i += 7) EXPECT_NEAR(p.grads()[i], 3 * g1[i], 1e-12 + 1e-10 * std::abs(g1[i]));
}

TEST(Gpt2Model, InitialLossIsLnVocab) {
  auto c = gpt2_preset("byte-tiny");
  GPT2Cpu<float> model(c, 4, 32);
  LocalParams<float> p(model);
  expect_initial_loss_is_ln_vocab(model, p, 7);
}

TEST(Gpt2Model, OverfitsOneBatch) {
  openblas_set_num_threads(1);  // tiny matmuls: BLAS threads only add waiting
  auto c = gpt2_preset("byte-tiny");
  const int B = 4, T = 24;
  GPT2Cpu<float> model(c, B, T);
  LocalParams<float> p(model);
  model.init_params(p.params(), 1);
  auto x = random_tokens(B * T, c.vocab_size, 9), y = random_tokens(B * T, c.vocab_size, 10);
  PlainAdamW adam(p.size(), 3e-3f);
  float first = 0, last = 0;
  for (int step = 0; step < 150; ++step) {
    last = adam.train_step(model, p, x.data(), y.data(), B, T);
    if (step == 0) first = last;
  }
  EXPECT_GT(first, 5.0f);
  EXPECT_LT(last, 0.1f) << "random targets memorised from " << first;
}

TEST(Gpt2Model, ActivationCheckpointingGivesIdenticalGradients) {
  expect_checkpointing_changes_only_memory<GPT2Cpu>(micro_config());
}

TEST(Gpt2Model, FloatModelAgreesWithFloat64Reference) {
  expect_float_agrees_with_float64<GPT2Cpu>(micro_config());
}

TEST(Gpt2Model, FollowsTheLayerProtocol) {
  auto c = micro_config();
  GPT2Cpu<float> model(c, 1, 8, true);
  LocalParams<float> p(model);
  model.init_params(p.params(), 3);
  ProtocolChecker checker(p, p, model);
  checker.run(model, random_tokens(8, c.vocab_size, 17), 1, 8);
  EXPECT_EQ(checker.order, (std::vector<int>{3, 2, 1, 0}));  // head, blocks top-down, embedding
}

TEST(Gpt2Model, RejectsBadInput) {
  auto c = micro_config();
  GPT2Cpu<float> model(c, 2, 8);
  LocalParams<float> p(model);
  expect_refuses_bad_batches(model, p);
  EXPECT_THROW(GPT2Cpu<float>(c, 1, 9), dsx::Error);  // beyond the context
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
