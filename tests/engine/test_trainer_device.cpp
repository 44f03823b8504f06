// The Trainer with ZeRO on the model's device (the arrangement a GPU run takes without offload),
// run here on the cpu device with the stream-order checker and random stream delays: it trains
// exactly as ZeRO on the host does, counts the model's activations in the same ledger, and moves
// a checkpoint's partition state through host copies (save_partition / load_partition).
// Real ranks over ofi shm; each rank throws, naming the difference, when a check fails.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "device/cpu_device.h"
#include "dsx/error.h"
#include "config/ds_config.h"
#include "engine/trainer.h"
#include "models/data/addition.h"
#include "models/gpt2/gpt2_cpu.h"
#include "tests/comm/comm_harness.h"
#include "tests/engine/zero_test_config.h"

namespace {

using dsx::config::EngineConfig;
using dsx::engine::Trainer;

dsx::config::EngineConfig config_for(int stage, int world) {
  return dsx::test::zero_test_config(stage, world, /*gradient_clipping=*/1.0, /*reduce_bucket_size=*/4000);
}

struct TrainedRun {
  std::vector<float> weights;
  std::vector<double> losses;
};

// Three steps of byte-tiny on the addition task; `device` null: ZeRO on the host.
TrainedRun train(const dsx::config::EngineConfig& config, dsx::comm::Communicator& comm, dsx::device::Device* device,
          const std::vector<float>& initial, std::unique_ptr<Trainer>* keep = nullptr,
          std::unique_ptr<dsx::models::Model>* keep_model = nullptr) {
  const dsx::models::AdditionTask task(2);
  auto model = std::make_unique<dsx::models::GPT2Cpu<float>>(dsx::models::gpt2_preset("byte-tiny"), 2, task.seq_len());
  auto trainer = std::make_unique<Trainer>(config, *model, comm, initial.data(), 0, device);
  if (trainer->zero().memory().bytes(dsx::zero::MemoryKind::Activations) != model->activation_bytes()) {
    throw std::runtime_error("the ledger does not count the model's activations");
  }
  dsx::models::AdditionLoader loader(task, 2, comm.rank(), comm.size(), 7);
  TrainedRun run;
  for (int step = 0; step < 3; ++step) run.losses.push_back(trainer->train_batch(loader).loss);
  run.weights.resize(model->num_params());
  trainer->zero().gather_params(run.weights.data());
  if (keep) *keep = std::move(trainer);
  if (keep_model) *keep_model = std::move(model);
  return run;
}

std::vector<float> initial_params() {
  dsx::models::GPT2Cpu<float> model(dsx::models::gpt2_preset("byte-tiny"), 1, 1);
  std::vector<float> p(model.num_params());
  model.init_params(p.data(), 11);
  return p;
}

void expect_same(const std::vector<float>& a, const std::vector<float>& b, const std::string& what) {
  if (a.size() != b.size()) throw std::runtime_error(what + ": sizes differ");
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i] != b[i]) {
      throw std::runtime_error(what + ": element " + std::to_string(i) + " is " + std::to_string(a[i]) + ", not " +
                               std::to_string(b[i]));
    }
  }
}

class TrainerOnDevice : public ::testing::TestWithParam<int> {};

TEST_P(TrainerOnDevice, TrainsExactlyAsZeroOnTheHost) {
  const int stage = GetParam();
  auto job = dsx::test::run_job(2, dsx::test::test_options("shm"), [&](dsx::comm::Communicator& comm, int) {
    const dsx::config::EngineConfig config = config_for(stage, comm.size());
    const std::vector<float> initial = initial_params();
    const TrainedRun host = train(config, comm, nullptr, initial);
    auto device = dsx::device::make_cpu_device(dsx::device::cpu_device_options_from_environment({}));
    const TrainedRun resident = train(config, comm, device.get(), initial);
    expect_same(resident.weights, host.weights, "weights after 3 steps");
    for (size_t i = 0; i < host.losses.size(); ++i) {
      if (resident.losses[i] != host.losses[i]) throw std::runtime_error("loss of step " + std::to_string(i) + " differs");
    }
    if (!(host.losses.back() < host.losses.front())) throw std::runtime_error("the loss did not fall");
  }, std::chrono::seconds(120));
  ASSERT_TRUE(job.all_ok()) << job.summary();
}

INSTANTIATE_TEST_SUITE_P(Stages, TrainerOnDevice, ::testing::Values(0, 1, 2, 3),
                         [](const auto& info) { return "stage" + std::to_string(info.param); });

// A checkpoint's partition state leaves the device as host copies and comes back: after a load,
// the next step is the step the saved state would have taken.
TEST(TrainerOnDevice, PartitionStateRoundTripsThroughHostCopies) {
  auto job = dsx::test::run_job(2, dsx::test::test_options("shm"), [&](dsx::comm::Communicator& comm, int) {
    const dsx::config::EngineConfig config = config_for(2, comm.size());
    const std::vector<float> initial = initial_params();
    auto device = dsx::device::make_cpu_device(dsx::device::cpu_device_options_from_environment({}));
    std::unique_ptr<Trainer> trainer;
    std::unique_ptr<dsx::models::Model> model;
    train(config, comm, device.get(), initial, &trainer, &model);
    dsx::zero::ZeroEngine& z = trainer->zero();
    const auto saved = z.save_partition();
    if (saved.master.size() != z.master_numel() || saved.optimizer.size() != 2 ||
        saved.optimizer[0].first != "exp_avg" || saved.optimizer[1].first != "exp_avg_sq") {
      throw std::runtime_error("save_partition: unexpected shape");
    }
    bool moments_moved = false;
    for (float v : saved.optimizer[1].second) moments_moved |= v != 0.0f;
    if (!moments_moved) throw std::runtime_error("exp_avg_sq is all zero after 3 steps: not the device's state");

    const dsx::models::AdditionTask task(2);
    dsx::models::AdditionLoader loader(task, 2, comm.rank(), comm.size(), 99);
    trainer->train_batch(loader);  // moves everything on
    const auto after_step = z.save_partition();
    z.load_partition(saved);
    expect_same(z.save_partition().master, saved.master, "master after load");
    expect_same(z.save_partition().optimizer[0].second, saved.optimizer[0].second, "exp_avg after load");
    z.optimizer().set_steps(z.optimizer().steps() - 1);
    dsx::models::AdditionLoader again(task, 2, comm.rank(), comm.size(), 99);
    trainer->train_batch(again);
    expect_same(z.save_partition().master, after_step.master, "the replayed step");

    auto wrong = saved;
    wrong.master.pop_back();
    try {
      z.load_partition(wrong);
      throw std::runtime_error("a partition of the wrong size was loaded");
    } catch (const dsx::Error& e) {
      if (std::string(e.what()).find("elements") == std::string::npos) throw;
    }
  }, std::chrono::seconds(120));
  ASSERT_TRUE(job.all_ok()) << job.summary();
}

}  // namespace
