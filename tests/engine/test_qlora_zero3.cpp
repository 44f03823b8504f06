// QLoRA at ZeRO stage 3 on two real ranks: the bitsandbytes 4-bit fixture's base partitioned as it
// is stored (engine/partitioned_nf4_frozen_weights.h). Each rank keeps about half of the NF4 codes,
// absmax and dense tensors; a gathered layer gives back every NF4 tensor bit for bit and every
// dense tensor exactly; and training the adapters for 8 steps follows the same loss trajectory,
// and ends with the same adapters, as stage 0 with the whole base on every rank.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "config/ds_config.h"
#include "engine/partitioned_nf4_frozen_weights.h"
#include "engine/trainer.h"
#include "models/lora/lora_factory.h"
#include "models/lora/nf4_frozen_weights.h"
#include "models/lora/qlora_factory.h"
#include "tests/comm/comm_harness.h"

namespace {

namespace m = dsx::models;
const std::string kBnb = std::string(DSX_SOURCE_DIR) + "/tests/models/data/llama_bnb_nf4";
constexpr int kMicro = 2, kSeq = 8, kSteps = 8;

// Rank r's rows of step s: tokens drawn from (s, r) alone, so both stages see the same data.
class SeededLoader final : public m::DataLoader {
 public:
  explicit SeededLoader(int rank) : rank_(rank) {}
  void next(m::Batch& b) override {
    b.B = kMicro, b.T = kSeq;
    b.inputs.resize(kMicro * kSeq), b.targets.resize(kMicro * kSeq);
    uint64_t x = 0x9e3779b97f4a7c15ull * (step_ * 2 + static_cast<uint64_t>(rank_) + 1);
    for (size_t i = 0; i < b.inputs.size(); ++i) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      b.inputs[i] = static_cast<int32_t>(x % 64);
      b.targets[i] =
          static_cast<int32_t>((b.inputs[i] * 7 + 3) % 64);  // a map the adapters can learn
    }
    ++step_;
  }
  m::LoaderPosition position() const override { return {0, 0, step_}; }
  void seek(const m::LoaderPosition& p) override { step_ = p.sample; }
  int vocab_size() const override { return 64; }

 private:
  int rank_;
  uint64_t step_ = 0;
};

dsx::config::EngineConfig config_for(int stage, int world) {
  const std::string text =
      R"({"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 1,
    "optimizer": {"type": "AdamW", "params": {"lr": 1e-2, "weight_decay": 0.0}},
    "zero_optimization": {"stage": )" +
      std::to_string(stage) +
      R"(, "overlap_comm": true, "reduce_bucket_size": 500,
      "stage3_prefetch_bucket_size": 300, "stage3_param_persistence_threshold": 50}})";
  dsx::config::ConfigInputs inputs;
  inputs.world_size = world;
  return dsx::config::read_ds_config_text(text, "qlora test config", inputs);
}

m::ModelBuildOptions build_options() {
  m::ModelBuildOptions o;
  o.max_batch = kMicro, o.max_seq = kSeq;
  return o;
}

const m::LoraConfig kLora = m::parse_lora_flag("r=4,alpha=8,targets=all-linear,init=false");

// Every NF4 tensor and dense tensor of the gathered layers equals the whole base's.
void expect_gathers_give_back_the_base(dsx::engine::PartitionedNf4FrozenWeights& part,
                                       m::Nf4FrozenWeights& whole, int blocks) {
  for (int b = 0; b < blocks; ++b) {
    part.acquire(b + 1);
    for (int p = 0; p < m::kNumProjections; ++p) {
      const auto proj = static_cast<m::Projection>(p);
      const auto &got = *part.tensor_of(b, proj), &want = *whole.linear(b, proj);
      if (got.packed != want.packed || got.absmax != want.absmax || !got.nested ||
          got.nested->codes != want.nested->codes || got.nested->absmax != want.nested->absmax ||
          got.nested->code != want.nested->code || got.nested->offset != want.nested->offset)
        throw std::runtime_error("block " + std::to_string(b) + " projection " + std::to_string(p) +
                                 ": the gathered NF4 state differs from the base's");
    }
    part.release(b + 1);
    if (!part.tensor_of(b, m::Projection::q)->packed.empty())
      throw std::runtime_error("release kept the codes");
  }
  for (size_t i = 0; i < whole.specs().size(); ++i) {
    const auto& s = whole.specs()[i];
    if (whole.quantized_tensor(i)) continue;
    part.acquire(s.layer);
    if (std::memcmp(part.param(i), whole.param(i), s.numel * sizeof(float)) != 0)
      throw std::runtime_error(s.name + ": the gathered dense tensor differs from the base's");
    part.release(s.layer);
  }
}

struct Trajectory {
  std::vector<double> losses;
  std::vector<float> adapters;
};

Trajectory train(int stage, dsx::comm::Communicator& comm) {
  const m::ModelSource source = m::qlora_model_source(kBnb);
  std::unique_ptr<m::LoraLlama> model;
  if (stage == 3) {
    m::Nf4FrozenWeights whole(source.shape.llama, m::read_nf4_base_weights(kBnb), kBnb);
    const int blocks = source.shape.llama.num_layers;
    auto part = std::make_unique<dsx::engine::PartitionedNf4FrozenWeights>(whole, blocks, comm);
    expect_gathers_give_back_the_base(*part, whole, blocks);
    // Half of the whole, but for each layer's padding and the nested codes every rank keeps.
    double replicated = 0;
    for (size_t i = 0; i < whole.specs().size(); ++i)
      if (const auto* t = whole.quantized_tensor(i))
        replicated += (t->nested->code.size() + 1) * sizeof(float);
    const double kept = static_cast<double>(part->share_bytes()),
                 all = static_cast<double>(whole.held_bytes());
    const double half = 0.5 * (all - replicated) + replicated;
    std::printf("rank %d keeps %.0f of the base's %.0f bytes (%.0f of them replicated)\n",
                comm.rank(), kept, all, replicated);
    if (kept > half + 64 || kept < half) throw std::runtime_error("the share is not half the base");
    model = m::make_lora_model(source.shape, std::move(part), kLora, build_options());
  } else {
    model = m::make_qlora_model(source, kLora, {}, build_options());
  }
  std::vector<float> initial(model->num_params());
  model->init_params(initial.data(), 11);
  dsx::engine::Trainer trainer(config_for(stage, comm.size()), *model, comm, initial.data(), 0,
                               nullptr);
  if (auto* part = dynamic_cast<dsx::engine::PartitionedNf4FrozenWeights*>(&model->frozen()))
    part->order_on(trainer.zero().device(), trainer.zero().comm_stream());
  SeededLoader loader(comm.rank());
  Trajectory t;
  for (int step = 0; step < kSteps; ++step) t.losses.push_back(trainer.train_batch(loader).loss);
  t.adapters.resize(model->num_params());
  trainer.zero().gather_params(t.adapters.data());
  return t;
}

double largest_difference(const std::vector<double>& a, const std::vector<double>& b) {
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::abs(a[i] - b[i]));
  return worst;
}

}  // namespace

TEST(QloraZero3, PartitionedNf4BaseTrainsAsTheWholeOne) {
  auto job = dsx::test::run_job(
      2, dsx::test::test_options("shm"),
      [&](dsx::comm::Communicator& comm, int rank) {
        const Trajectory whole = train(0, comm), partitioned = train(3, comm);
        const double loss_gap = largest_difference(whole.losses, partitioned.losses);
        const double adapter_gap =
            largest_difference({whole.adapters.begin(), whole.adapters.end()},
                               {partitioned.adapters.begin(), partitioned.adapters.end()});
        if (rank == 0)
          std::printf(
              "losses %.6f -> %.6f (stage 0) and %.6f -> %.6f (stage 3); largest gaps: loss %.3g, "
              "adapter %.3g\n",
              whole.losses.front(), whole.losses.back(), partitioned.losses.front(),
              partitioned.losses.back(), loss_gap, adapter_gap);
        if (!(whole.losses.back() < whole.losses.front() - 0.05))
          throw std::runtime_error("the loss did not fall");
        if (!(loss_gap <= 1e-6 * std::abs(whole.losses.front())) || !(adapter_gap <= 1e-6))
          throw std::runtime_error("stage 3 left stage 0's trajectory");
      },
      std::chrono::seconds(120));
  ASSERT_TRUE(job.all_ok()) << job.summary();
}
