// The Llama family through the Trainer at every ZeRO stage, on two real ranks over ofi shm: three
// steps of AdamW on the addition task land where one process computing the same global batches
// with LocalParams and a plain AdamW loop lands (float rounding apart), for Llama's layout (GQA,
// untied head) and Qwen2's (tied embeddings, q/k/v biases). Each rank throws, naming the
// difference, when a check fails.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "config/ds_config.h"
#include "engine/trainer.h"
#include "models/data/addition.h"
#include "models/llama/llama_cpu.h"
#include "models/local_params.h"
#include "tests/comm/comm_harness.h"
#include "tests/engine/zero_test_config.h"
#include "tests/models/plain_adamw.h"

namespace {

constexpr int kMicro = 2, kAccum = 2, kSteps = 3;
constexpr float kLr = 0.01f, kDecay = 0.1f;

// No clipping (DeepSpeed clips at 1.0 by default): the reference is plain AdamW.
dsx::config::EngineConfig config_for(int stage, int world) {
  return dsx::test::zero_test_config(stage, world, /*gradient_clipping=*/0.0, /*reduce_bucket_size=*/3000);
}

dsx::models::LlamaConfig shape(bool qwen2_layout) {
  dsx::models::LlamaConfig c = dsx::models::llama_preset("llama-tiny");
  if (qwen2_layout) {
    c.architecture = "Qwen2ForCausalLM", c.model_type = "qwen2";
    c.tie_word_embeddings = true, c.qkv_bias = true;
  }
  return c;
}

std::vector<float> initial_params(const dsx::models::LlamaConfig& c) {
  dsx::models::LlamaCpu<float> model(c, 1, 1);
  std::vector<float> p(model.num_params());
  model.init_params(p.data(), 5);
  // Biases start at zero; give them values so their gradients and updates are checked too.
  for (const auto& spec : model.params()) {
    if (spec.name.find(".bias") != std::string::npos) {
      for (size_t i = 0; i < spec.numel; ++i) p[spec.offset + i] = 0.01f * static_cast<float>(i % 7) - 0.03f;
    }
  }
  return p;
}

// What the two ranks' steps compute together, in one process: each step's gradient is the mean
// over both ranks' micro-batches, then AdamW.
std::vector<float> reference(const dsx::models::LlamaConfig& c, const std::vector<float>& initial, int world) {
  const dsx::models::AdditionTask task(2);
  dsx::models::LlamaCpu<float> model(c, kMicro, task.seq_len());
  dsx::models::LocalParams<float> local(model);
  std::copy(initial.begin(), initial.end(), local.params());
  dsx::test::PlainAdamW adam(local.size(), kLr, kDecay);
  std::vector<std::unique_ptr<dsx::models::AdditionLoader>> loaders;
  for (int r = 0; r < world; ++r) loaders.push_back(std::make_unique<dsx::models::AdditionLoader>(task, kMicro, r, world, 7));
  dsx::models::Batch batch;
  for (int step = 0; step < kSteps; ++step) {
    local.zero_grads();
    for (int micro = 0; micro < kAccum; ++micro) {
      for (auto& loader : loaders) {
        loader->next(batch);
        model.forward(batch.inputs.data(), batch.targets.data(), batch.B, batch.T, local);
        model.backward(local, local, 1.0f / static_cast<float>(kAccum * world));
      }
    }
    adam.step(local.params(), local.grads(), model.params());
  }
  return std::vector<float>(local.params(), local.params() + local.size());
}

void expect_close(const std::vector<float>& got, const std::vector<float>& want, const std::string& what) {
  if (got.size() != want.size()) throw std::runtime_error(what + ": sizes differ");
  double worst = 0;
  size_t at = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double d = std::abs(static_cast<double>(got[i]) - want[i]);
    if (d > worst) worst = d, at = i;
  }
  // Adam's steps are lr-sized (1e-2); summation order across ranks and buckets moves the last bits.
  if (worst > 2e-5) {
    throw std::runtime_error(what + ": element " + std::to_string(at) + " is " + std::to_string(got[at]) + ", not " +
                             std::to_string(want[at]) + " (largest difference " + std::to_string(worst) + ")");
  }
}

class LlamaZero : public ::testing::TestWithParam<std::tuple<int, bool>> {};

}  // namespace

TEST_P(LlamaZero, TrainsAsOneProcessComputingTheGlobalBatch) {
  const auto [stage, qwen2_layout] = GetParam();
  auto job = dsx::test::run_job(2, dsx::test::test_options("shm"), [&](dsx::comm::Communicator& comm, int) {
    const dsx::models::LlamaConfig c = shape(qwen2_layout);
    const std::vector<float> initial = initial_params(c);
    const dsx::models::AdditionTask task(2);
    dsx::models::LlamaCpu<float> model(c, kMicro, task.seq_len());
    const dsx::config::EngineConfig config = config_for(stage, comm.size());  // the Trainer keeps a reference
    dsx::engine::Trainer trainer(config, model, comm, initial.data(), 0, nullptr);
    dsx::models::AdditionLoader loader(task, kMicro, comm.rank(), comm.size(), 7);
    std::vector<double> losses;
    for (int step = 0; step < kSteps; ++step) losses.push_back(trainer.train_batch(loader).loss);
    std::vector<float> weights(model.num_params());
    trainer.zero().gather_params(weights.data());
    expect_close(weights, reference(c, initial, comm.size()), "weights after 3 steps at stage " + std::to_string(stage));
    if (!(losses.back() < losses.front())) throw std::runtime_error("the loss did not fall");
  }, std::chrono::seconds(120));
  ASSERT_TRUE(job.all_ok()) << job.summary();
}

INSTANTIATE_TEST_SUITE_P(Stages, LlamaZero, ::testing::Combine(::testing::Values(0, 1, 2, 3), ::testing::Bool()),
                         [](const auto& info) {
                           return "stage" + std::to_string(std::get<0>(info.param)) +
                                  (std::get<1>(info.param) ? "_qwen2_layout" : "_llama_layout");
                         });
