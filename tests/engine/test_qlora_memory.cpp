// Memory per rank of QLoRA, measured: a Llama (hidden 512, 6 blocks, vocabulary 256) whose block
// linears are NF4 with double quantisation, adapters r=8 on every linear, trained for two steps on
// two ranks at ZeRO 0 and ZeRO 3 (the NF4 base partitioned). On each rank the resident set grows,
// from before the base is built to after the steps, by what ZeRO's memory ledger counts (within
// 10%), and the ledger's model states (the frozen base as params, the adapters' params, grads and
// Adam state) are within 10% of dsx estimate's QLoRA row for that stage and world.
#include <gtest/gtest.h>
#include <malloc.h>

#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "config/ds_config.h"
#include "engine/partitioned_nf4_frozen_weights.h"
#include "engine/trainer.h"
#include "models/lora/lora_factory.h"
#include "models/lora/nf4_frozen_weights.h"
#include "tests/comm/comm_harness.h"
#include "tools/estimate/memory_model.h"

namespace {

namespace m = dsx::models;
namespace est = dsx::estimate;
constexpr int kSeq = 8;

// `hidden` 64 for the warm-up, else the measured model.
m::LlamaConfig llama(int hidden) {
  m::LlamaConfig c;
  c.vocab_size = 256, c.hidden_size = hidden, c.intermediate_size = 3 * hidden, c.num_layers = 4;
  c.num_heads = c.num_kv_heads = hidden / 64;
  c.head_dim = 64, c.max_position_embeddings = 64;
  return c;
}

std::vector<float> random_values(size_t n, uint64_t seed) {
  std::vector<float> v(n);
  uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
  for (auto& f : v)
    x ^= x << 13, x ^= x >> 7, x ^= x << 17, f = static_cast<float>(x % 2001) * 5e-5f - 0.05f;
  return v;
}

// The base as read_nf4_base_weights would give it for a folder, without the folder.
m::Nf4BaseWeights random_nf4_base(const m::LlamaConfig& c) {
  m::Nf4BaseWeights base;
  uint64_t seed = 1;
  for (const auto& s : m::llama_param_specs(c)) {
    const std::vector<float> values = random_values(s.numel, seed++);
    if (s.shape.size() == 2 && s.name.rfind("model.layers.", 0) == 0)
      base.linears[s.name] = dsx::kernels::nf4_quantize_matrix(
          values.data(), dsx::kernels::DType::F32, s.shape[0], s.shape[1], {.double_quant = true});
    else
      base.dense[s.name] = {s.shape, values};
  }
  return base;
}

// The rank's resident set now, after handing freed heap pages back.
double resident_megabytes() {
  malloc_trim(0);
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);)
    if (line.rfind("VmRSS:", 0) == 0) return std::stod(line.substr(6)) * 1024 / 1e6;  // KiB -> MB
  throw std::runtime_error("no VmRSS in /proc/self/status");
}

dsx::config::EngineConfig config_for(int stage, int world) {
  const std::string text =
      R"({"train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 1,
    "optimizer": {"type": "AdamW", "params": {"lr": 1e-3}}, "zero_optimization": {"stage": )" +
      std::to_string(stage) + "}}";
  dsx::config::ConfigInputs inputs;
  inputs.world_size = world;
  return dsx::config::read_ds_config_text(text, "qlora memory config", inputs);
}

std::unique_ptr<m::LoraLlama> qlora_model(const m::LlamaConfig& c, int stage,
                                          dsx::comm::Communicator& comm) {
  m::ModelShape shape;
  shape.family = m::ModelShape::Family::Llama, shape.llama = c;
  m::ModelBuildOptions options;
  options.max_batch = 1, options.max_seq = kSeq;
  const m::LoraConfig lora = m::parse_lora_flag("r=8,alpha=16,targets=all-linear");
  auto whole = std::make_unique<m::Nf4FrozenWeights>(c, random_nf4_base(c), "random base");
  if (stage != 3) return m::make_lora_model(shape, std::move(whole), lora, options);
  auto part =
      std::make_unique<dsx::engine::PartitionedNf4FrozenWeights>(*whole, c.num_layers, comm);
  return m::make_lora_model(shape, std::move(part), lora, options);
}

class Tokens final : public m::DataLoader {
 public:
  void next(m::Batch& b) override {
    b.B = 1, b.T = kSeq;
    b.inputs = {1, 5, 9, 13, 17, 21, 25, 29}, b.targets = {5, 9, 13, 17, 21, 25, 29, 33};
  }
  m::LoaderPosition position() const override { return {}; }
  void seek(const m::LoaderPosition&) override {}
  int vocab_size() const override { return 256; }
};

double estimated_model_states(const m::LlamaConfig& c, int stage, int world) {
  est::EstimateRequest r;
  r.model.layers = c.num_layers, r.model.hidden = c.hidden_size, r.model.heads = c.num_heads;
  r.model.kv_heads = c.num_kv_heads, r.model.vocab = c.vocab_size,
  r.model.intermediate = c.intermediate_size;
  r.model.max_seq_len = c.max_position_embeddings;
  r.precision = est::Precision::Fp32;
  r.adapter = {8, {"all-linear"}, true};
  r.activations.seq_len = kSeq, r.activations.micro_batch = 1;
  r.cluster = {world, 1};
  r.gpu_memory_bytes = int64_t{1} << 40;
  return static_cast<double>(
             est::estimate_memory(r, {stage, est::Offload::None, est::Method::Qlora})
                 .gpu_model_states) /
         1e6;
}

// One rank's figures, checked unless `warm_up`; throws naming what is off.
void measure(const m::LlamaConfig& c, int stage, dsx::comm::Communicator& comm,
             bool warm_up = false) {
  using dsx::zero::MemoryKind;
  const double before = resident_megabytes();
  auto model = qlora_model(c, stage, comm);
  std::vector<float> initial(model->num_params());
  model->init_params(initial.data(), 3);
  dsx::engine::Trainer trainer(config_for(stage, comm.size()), *model, comm, initial.data(), 0,
                               nullptr);
  if (auto* part = dynamic_cast<dsx::engine::PartitionedNf4FrozenWeights*>(&model->frozen()))
    part->order_on(trainer.zero().device(), trainer.zero().comm_stream());
  std::vector<float>().swap(initial);
  Tokens tokens;
  for (int step = 0; step < 2; ++step) trainer.train_batch(tokens);
  const double grown = resident_megabytes() - before;
  const auto& ledger = trainer.zero().memory();
  const double counted = static_cast<double>(ledger.peak_total()) / 1e6;
  const double states =
      static_cast<double>(ledger.peak(MemoryKind::Params) + ledger.peak(MemoryKind::Grads) +
                          ledger.peak(MemoryKind::OptimizerState)) /
      1e6;
  const double predicted = estimated_model_states(c, stage, comm.size());
  std::printf(
      "stage %d rank %d: resident set grew %.2f MB; the ledger counts %.2f MB, of which model "
      "states "
      "%.2f MB; dsx estimate's model states %.2f MB\n",
      stage, comm.rank(), grown, counted, states, predicted);
  if (warm_up) return;
  if (std::abs(grown - counted) > 0.10 * counted)
    throw std::runtime_error("RSS is not within 10% of the ledger");
  if (std::abs(states - predicted) > 0.10 * predicted)
    throw std::runtime_error("the ledger's model states are not within 10% of dsx estimate's");
}

class QloraMemory : public ::testing::TestWithParam<int> {};

}  // namespace

TEST_P(QloraMemory, ResidentSetLedgerAndEstimateAgree) {
  const int stage = GetParam();
  auto job = dsx::test::run_job(
      2, dsx::test::test_options("shm"),
      [&](dsx::comm::Communicator& comm, int) {
        // What the first run pays once (BLAS buffers, the shm transport's
        // regions, worker threads) is paid by a small model first.
        measure(llama(64), stage, comm, true);
        measure(llama(384), stage, comm);
      },
      std::chrono::seconds(120));
  ASSERT_TRUE(job.all_ok()) << job.summary();
}

INSTANTIATE_TEST_SUITE_P(Stages, QloraMemory, ::testing::Values(0, 3),
                         [](const auto& info) { return "stage" + std::to_string(info.param); });
