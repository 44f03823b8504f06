// LoRA beside PEFT: dsx trains LoRA adapters on the tiny transformers Llama of
// tests/models/data/llama through the Trainer on two real ranks at ZeRO stages 0, 2 and 3, from
// the initial adapter PEFT saved, on the same batches with the same AdamW, and each of the 20
// steps' losses, the trained adapter and the trained model's logits equal what PEFT +
// transformers computed in float64 (tests/models/data/llama_lora, made by
// tests/models/compat/make_lora_fixtures.py), to float32 rounding. ZeRO holds the adapters only;
// at stage 3 the frozen base is partitioned too (each rank keeps half, gathered per layer).
// The same for base tensors trained in full beside the adapters (make_lora_trained_base_fixtures.py):
// modules_to_save = [lm_head, embed_tokens] on the Llama, bias = "all" on the Qwen2 (q/k/v biases);
// ZeRO then holds the adapters and those tensors, and PEFT's names for them are dsx's. And for
// GPT-2 (make_gpt2_lora_fixtures.py): adapters on its Conv1D layers c_attn, c_proj and c_fc.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "config/ds_config.h"
#include "dsx/json_input.h"
#include "engine/partitioned_frozen_weights.h"
#include "engine/trainer.h"
#include "models/io/hf_folder.h"
#include "models/io/safetensors.h"
#include "models/local_params.h"
#include "models/lora/frozen_weights.h"
#include "models/lora/lora_factory.h"
#include "models/lora/lora_llama.h"
#include "models/lora/peft_adapter.h"
#include "tests/comm/comm_harness.h"

namespace {

const std::string kData = std::string(DSX_SOURCE_DIR) + "/tests/models/data/";
constexpr int kMicro = 2;

struct Case {
  std::string fixture, base;  // folders under tests/models/data
  int stage;
};

struct Expected {
  std::vector<std::vector<int32_t>> inputs, targets;  // per step: rows x seq, flat
  std::vector<double> losses, eval_logits;
  std::vector<int32_t> eval_inputs;
  std::vector<std::string> trained_in_full;  // PEFT's names of the base tensors it trained
  int rows = 0, seq = 0;
  double lr = 0, weight_decay = 0;
};

std::vector<int32_t> flat_rows(const rapidjson::Value& rows) {
  std::vector<int32_t> out;
  for (const auto& row : rows.GetArray())
    for (const auto& t : row.GetArray()) out.push_back(t.GetInt());
  return out;
}

Expected read_expected(const Case& c) {
  const std::string path = kData + c.fixture + "/expected.json";
  const auto doc = dsx::parse_json(dsx::read_bounded_file(path), path);
  Expected e;
  for (const auto& step : doc["inputs"].GetArray()) e.inputs.push_back(flat_rows(step));
  for (const auto& step : doc["targets"].GetArray()) e.targets.push_back(flat_rows(step));
  for (const auto& l : doc["losses"].GetArray()) e.losses.push_back(l.GetDouble());
  for (const auto& l : doc["eval_logits"].GetArray()) e.eval_logits.push_back(l.GetDouble());
  e.eval_inputs = flat_rows(doc["eval_inputs"]);
  e.rows = doc["rows"].GetInt(), e.seq = doc["seq"].GetInt();
  e.lr = doc["lr"].GetDouble(), e.weight_decay = doc["weight_decay"].GetDouble();
  if (doc.HasMember("trained_in_full"))
    for (const auto& n : doc["trained_in_full"].GetArray()) e.trained_in_full.emplace_back(n.GetString());
  return e;
}

// Rank r's share of each step's global batch: rows [r * kMicro, (r + 1) * kMicro).
class FixtureLoader final : public dsx::models::DataLoader {
 public:
  FixtureLoader(const Expected& e, int rank) : e_(e), rank_(rank) {}
  void next(dsx::models::Batch& b) override {
    const size_t first = static_cast<size_t>(rank_) * kMicro * e_.seq, n = static_cast<size_t>(kMicro) * e_.seq;
    b.B = kMicro, b.T = e_.seq;
    b.inputs.assign(e_.inputs[step_].begin() + first, e_.inputs[step_].begin() + first + n);
    b.targets.assign(e_.targets[step_].begin() + first, e_.targets[step_].begin() + first + n);
    ++step_;
  }
  dsx::models::LoaderPosition position() const override { return {0, 0, step_}; }
  void seek(const dsx::models::LoaderPosition& p) override { step_ = p.sample; }
  int vocab_size() const override { return 64; }

 private:
  const Expected& e_;
  int rank_;
  uint64_t step_ = 0;
};

dsx::config::EngineConfig config_for(const Expected& e, int stage, int world) {
  const std::string text = R"({"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 1,
    "gradient_clipping": 0.0, "optimizer": {"type": "AdamW", "params": {"lr": )" + std::to_string(e.lr) +
                           R"(, "weight_decay": )" + std::to_string(e.weight_decay) +
                           R"(, "betas": [0.9, 0.999], "eps": 1e-8}},
    "zero_optimization": {"stage": )" + std::to_string(stage) +
                           R"(, "overlap_comm": true, "reduce_bucket_size": 500,
      "stage3_prefetch_bucket_size": 300, "stage3_param_persistence_threshold": 50}})";
  dsx::config::ConfigInputs inputs;
  inputs.world_size = world;
  return dsx::config::read_ds_config_text(text, "lora test config", inputs);
}

// GPT-2: a LoraGpt2 over the base held whole (dsx does not partition GPT-2's base).
std::unique_ptr<dsx::models::LoraModel> gpt2_lora_model(const Case& c, int batch) {
  dsx::models::ModelSource base = dsx::models::load_model_source(kData + c.base);
  dsx::models::ModelBuildOptions options;
  options.max_batch = batch, options.max_seq = 8;
  return dsx::models::make_lora_model(
      base.shape, std::move(base.initial),
      dsx::models::read_peft_adapter_config(kData + c.fixture + "/adapter_config.json"), options);
}

// `partitioned`: the frozen base as stage 3 keeps it, each rank holding half; else dense.
std::unique_ptr<dsx::models::LoraModel> lora_model(const Case& c, int batch,
                                                   dsx::comm::Communicator* partitioned = nullptr) {
  if (c.base == "gpt2") return gpt2_lora_model(c, batch);
  dsx::models::LlamaWeights base = dsx::models::read_llama_hf_folder(kData + c.base);
  const auto lora = dsx::models::read_peft_adapter_config(kData + c.fixture + "/adapter_config.json");
  const auto specs = dsx::models::llama_param_specs(base.config);
  std::unique_ptr<dsx::models::ParamAccess> frozen;
  if (partitioned) {
    auto p = std::make_unique<dsx::engine::PartitionedFrozenWeights>(specs, base.params, *partitioned);
    const size_t whole = base.params.size(), held = p->held_elements();
    if (held * 2 > whole + 2 * specs.size() + 8)
      throw std::runtime_error("the partitioned base holds " + std::to_string(held) + " of " + std::to_string(whole));
    frozen = std::move(p);
  } else {
    frozen = std::make_unique<dsx::models::DenseFrozenWeights>(specs, std::move(base.params));
  }
  return std::make_unique<dsx::models::LoraLlama>(base.config, lora, batch, 8, false, std::move(frozen));
}

// The adapter PEFT trained, in the model's flat layout.
std::vector<float> peft_final_adapter(const Case& c, const dsx::models::Model& model) {
  const dsx::models::SafetensorsReader file(kData + c.fixture + "/final_adapter.safetensors");
  if (file.tensors().size() != model.params().size())
    throw std::runtime_error("PEFT trained " + std::to_string(file.tensors().size()) + " tensors, dsx " +
                             std::to_string(model.params().size()));
  std::vector<float> out(model.num_params());
  for (const auto& spec : model.params()) {
    const auto* t = file.find(dsx::models::peft_tensor_name(spec));
    if (!t || t->numel() != spec.numel) throw std::runtime_error("final_adapter lacks " + spec.name);
    std::memcpy(out.data() + spec.offset, t->data, spec.numel * sizeof(float));
  }
  return out;
}

void expect_close(const std::vector<double>& got, const std::vector<double>& want, double tolerance,
                  const std::string& what) {
  if (got.size() != want.size()) throw std::runtime_error(what + ": sizes differ");
  double worst = 0;
  size_t at = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double d = std::abs(got[i] - want[i]);
    if (!(d <= worst)) worst = d, at = i;
  }
  char worst_text[32];
  std::snprintf(worst_text, sizeof worst_text, "%.3g", worst);
  if (!(worst <= tolerance))
    throw std::runtime_error(what + ": element " + std::to_string(at) + " is " + std::to_string(got[at]) +
                             ", PEFT's is " + std::to_string(want[at]) + " (largest difference " +
                             worst_text + ")");
}

// A key bias changes the attention scores only through the rotary angles (softmax ignores what
// adds the same to every key of a row), so in the channels that rotate slowly (rope_theta 1e6) its
// gradient is nearly zero and rounding noise; Adam divides by that gradient's own size, so its
// float32 steps there differ from float64's by more than rounding (8.7e-5 seen after 12 steps).
// GPT-2's adapters: all but a few elements within 2e-6; two (of layer 1's mlp.c_proj) within 1e-5,
// the same effect of Adam on an element whose gradient is almost zero.
double tolerance_after_steps(const dsx::models::ParamSpec& spec) {
  if (spec.name.ends_with("k_proj.bias")) return 2e-4;
  return spec.name.starts_with("transformer.") ? 2e-5 : 5e-6;
}

// dsx trains in full exactly the base tensors PEFT trained, under PEFT's names.
void expect_same_trained_base(const dsx::models::LoraModel& model, const Expected& e) {
  std::vector<std::string> ours;
  if (const auto* llama = dynamic_cast<const dsx::models::LoraLlama*>(&model))
    for (const auto& spec : llama->trained_base().specs) ours.push_back(dsx::models::peft_tensor_name(spec));
  std::sort(ours.begin(), ours.end());
  if (ours != e.trained_in_full)
    throw std::runtime_error("dsx trains " + std::to_string(ours.size()) + " base tensors in full, PEFT " +
                             std::to_string(e.trained_in_full.size()) + (ours.empty() ? "" : "; first " + ours[0]));
}

class LoraBesidePeft : public ::testing::TestWithParam<Case> {};

void PrintTo(const Case& c, std::ostream* out) { *out << c.fixture << " at stage " << c.stage; }

}  // namespace

TEST_P(LoraBesidePeft, EveryStepOnTwoRanksEqualsPeft) {
  const Case& c = GetParam();
  const int stage = c.stage;
  const Expected e = read_expected(c);
  ASSERT_EQ(e.rows, 2 * kMicro);
  auto job = dsx::test::run_job(2, dsx::test::test_options("shm"), [&](dsx::comm::Communicator& comm, int) {
    auto model = lora_model(c, kMicro, stage == 3 ? &comm : nullptr);
    expect_same_trained_base(*model, e);
    std::vector<float> initial(model->num_params());
    dsx::models::read_peft_adapter_weights(kData + c.fixture, model->params(), initial.data());
    const dsx::config::EngineConfig config = config_for(e, stage, comm.size());
    dsx::engine::Trainer trainer(config, *model, comm, initial.data(), 0, nullptr);
    if (auto* partitioned = dynamic_cast<dsx::engine::PartitionedFrozenWeights*>(&model->frozen()))
      partitioned->order_on(trainer.zero().device(), trainer.zero().comm_stream());
    // ZeRO holds the adapters and nothing of the base: no gradient, no optimizer state for it.
    const size_t base_numel = model->base_numel();
    if (trainer.zero().numel() != model->num_params() || trainer.zero().master_numel() > model->num_params())
      throw std::runtime_error("ZeRO holds " + std::to_string(trainer.zero().numel()) + " elements, the adapters are " +
                               std::to_string(model->num_params()) + " (the base " + std::to_string(base_numel) + ")");
    FixtureLoader loader(e, comm.rank());
    std::vector<double> losses;
    for (size_t step = 0; step < e.losses.size(); ++step) losses.push_back(trainer.train_batch(loader).loss);
    expect_close(losses, e.losses, 5e-6, "stage " + std::to_string(stage) + " losses");
    std::vector<float> weights(model->num_params());
    trainer.zero().gather_params(weights.data());
    const std::vector<float> want = peft_final_adapter(c, *model);
    for (const auto& spec : model->params())
      expect_close({weights.begin() + spec.offset, weights.begin() + spec.offset + spec.numel},
                   {want.begin() + spec.offset, want.begin() + spec.offset + spec.numel}, tolerance_after_steps(spec),
                   "stage " + std::to_string(stage) + " " + spec.name + " after the steps");
    // The trained model's logits on PEFT's evaluation batch.
    auto eval = lora_model(c, 2);
    dsx::models::LocalParams<float> params(*eval);
    std::copy(weights.begin(), weights.end(), params.params());
    eval->forward(e.eval_inputs.data(), nullptr, 2, e.seq, params);
    const auto logits = eval->logits();
    expect_close({logits.begin(), logits.end()}, e.eval_logits, 2e-5, "logits after training");
  }, std::chrono::seconds(120));
  ASSERT_TRUE(job.all_ok()) << job.summary();
}

INSTANTIATE_TEST_SUITE_P(Cases, LoraBesidePeft,
                         ::testing::Values(Case{"llama_lora", "llama", 0}, Case{"llama_lora", "llama", 2},
                                           Case{"llama_lora", "llama", 3}, Case{"llama_lora_saved", "llama", 0},
                                           Case{"llama_lora_saved", "llama", 3}, Case{"qwen2_lora_bias", "qwen2", 0},
                                           Case{"qwen2_lora_bias", "qwen2", 3}, Case{"gpt2_lora", "gpt2", 0},
                                           Case{"gpt2_lora", "gpt2", 3}),
                         [](const auto& info) { return info.param.fixture + "_stage" + std::to_string(info.param.stage); });
