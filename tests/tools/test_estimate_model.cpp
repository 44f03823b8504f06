// The memory model's own pieces: config.json reading, activation formulas against the
// published ones, the stage ordering, fits / max micro-batch / fewest GPUs consistency.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "config/ds_config.h"
#include "dsx/error.h"
#include "tools/estimate/activations.h"
#include "tools/estimate/hf_config.h"
#include "tools/estimate/memory_model.h"
#include "tools/estimate/model_presets.h"

namespace est = dsx::estimate;

namespace {

// Hugging Face's gpt2 and Llama-2-70b config.json, trimmed to the keys that matter plus a few
// that do not.
const char* kGpt2Config = R"({
  "activation_function": "gelu_new", "architectures": ["GPT2LMHeadModel"],
  "model_type": "gpt2", "n_ctx": 1024, "n_embd": 768, "n_head": 12, "n_inner": null,
  "n_layer": 12, "n_positions": 1024, "vocab_size": 50257, "resid_pdrop": 0.1
})";

const char* kLlama70bConfig = R"({
  "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_act": "silu",
  "hidden_size": 8192, "intermediate_size": 28672, "max_position_embeddings": 4096,
  "num_attention_heads": 64, "num_hidden_layers": 80, "num_key_value_heads": 8,
  "rms_norm_eps": 1e-05, "tie_word_embeddings": false, "vocab_size": 32000
})";

template <typename Fn>
std::string error_of(Fn fn, dsx::ErrorKind expected_kind) {
  try {
    fn();
  } catch (const dsx::Error& e) {
    EXPECT_EQ(e.kind(), expected_kind) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "no error thrown";
  return "";
}

est::EstimateRequest request_for(const char* preset, int64_t gpus_per_node, int64_t nodes) {
  est::EstimateRequest r;
  r.model = est::find_model_preset(preset);
  r.activations.seq_len = r.model.max_seq_len;
  r.cluster = {gpus_per_node, nodes};
  r.gpu_memory_bytes = int64_t{80} << 30;
  return r;
}

}  // namespace

TEST(EstimateHfConfig, Gpt2ConfigGivesThePresetCounts) {
  auto shape = est::parse_hf_config(kGpt2Config, "gpt2/config.json");
  auto preset = est::find_model_preset("gpt2");
  EXPECT_EQ(shape.arch, est::Architecture::Gpt2);
  EXPECT_EQ(shape.intermediate, 3072);  // n_inner: null means 4 * n_embd
  EXPECT_TRUE(shape.tied_embeddings);
  EXPECT_EQ(est::parameter_count(shape), 124439808);
  EXPECT_EQ(est::largest_layer_params(shape), est::largest_layer_params(preset));
}

TEST(EstimateHfConfig, LlamaConfigWithGroupedKvHeads) {
  auto shape = est::parse_hf_config(kLlama70bConfig, "config.json");
  EXPECT_EQ(shape.kv_heads, 8);
  EXPECT_EQ(est::parameter_count(shape), 68976648192);
  EXPECT_EQ(est::largest_layer_params(shape), 262144000);
}

TEST(EstimateHfConfig, TiedEmbeddingsAreCountedOnce) {
  std::string tied = kLlama70bConfig;
  tied.replace(tied.find("\"tie_word_embeddings\": false"), 28, "\"tie_word_embeddings\": true");
  EXPECT_EQ(est::parameter_count(est::parse_hf_config(tied, "c.json")), 68976648192 - 32000 * 8192);
}

TEST(EstimateHfConfig, MissingKeyIsNamedWithBothSpellings) {
  auto msg = error_of(
      [] {
        est::parse_hf_config(R"({"model_type": "llama", "hidden_size": 64})", "m/config.json");
      },
      dsx::ErrorKind::Config);
  EXPECT_NE(msg.find("m/config.json"), std::string::npos) << msg;
  EXPECT_NE(msg.find("\"num_hidden_layers\" or \"n_layer\""), std::string::npos) << msg;
}

TEST(EstimateHfConfig, WrongTypeAndBadJsonSayWhere) {
  auto msg = error_of([] { est::parse_hf_config(R"({"hidden_size": "4096"})", "c.json"); },
                      dsx::ErrorKind::Config);
  EXPECT_NE(msg.find("\"hidden_size\" must be a non-negative integer"), std::string::npos) << msg;
  msg = error_of([] { est::parse_hf_config("{\n\"hidden_size\": 64,\n\"n_layer\" 2}", "c.json"); },
                 dsx::ErrorKind::Config);
  EXPECT_NE(msg.find("c.json:3:11: invalid JSON"), std::string::npos) << msg;
  msg = error_of([] { est::read_hf_config("/nonexistent/config.json"); }, dsx::ErrorKind::Io);
  EXPECT_NE(msg.find("/nonexistent/config.json"), std::string::npos) << msg;
  msg = error_of([] { est::read_hf_config(DSX_SOURCE_DIR); }, dsx::ErrorKind::Io);
  EXPECT_NE(msg.find("is a directory"), std::string::npos) << msg;
}

TEST(EstimateHfConfig, ImpossibleShapesAreRejected) {
  auto msg = error_of(
      [] {
        est::parse_hf_config(
            R"({"hidden_size": 100, "num_hidden_layers": 2, "num_attention_heads": 3,
                                 "vocab_size": 10, "intermediate_size": 400})",
            "c.json");
      },
      dsx::ErrorKind::Config);
  EXPECT_NE(msg.find("not divisible by 3 heads"), std::string::npos) << msg;
}

// Korthikanti et al. (2022), eq. 2: s·b·h·(34 + 5·a·s/h) bytes per layer, GPT in 16-bit.
TEST(EstimateActivations, Gpt2EagerEqualsKorthikanti) {
  for (const char* name : {"gpt2", "gpt2-xl"}) {
    auto shape = est::find_model_preset(name);
    est::ActivationOptions o{1024, 4, 2, false, false};
    auto bytes = est::activation_bytes(shape, o);
    const double s = 1024, b = 4, h = shape.hidden, a = shape.heads;
    const double expected = shape.layers * s * b * h * (34.0 + 5.0 * a * s / h);
    EXPECT_EQ(static_cast<double>(bytes.layers), expected) << name;
  }
}

TEST(EstimateActivations, FlashDropsTheScoresAndCheckpointingKeepsBlockInputs) {
  auto shape = est::find_model_preset("llama2-7b");
  est::ActivationOptions eager{4096, 1, 2, false, false};
  est::ActivationOptions flash{4096, 1, 2, true, false};
  const int64_t per_token = est::block_bytes_per_token(shape, flash);
  // Llama: norms 4h, attention 10h (no grouped kv here), MLP 2h + 8I, flash statistics 4a.
  EXPECT_EQ(per_token, 4 * 4096 + 10 * 4096 + 2 * 4096 + 8 * 11008 + 4 * 32);
  EXPECT_EQ(est::block_bytes_per_token(shape, eager) - per_token, 2 * 32 * 4096 - 4 * 32);
  est::ActivationOptions ckpt = flash;
  ckpt.checkpointing = true;
  EXPECT_EQ(est::activation_bytes(shape, ckpt).layers, 4096 * (32 * 2 * 4096 + per_token));
  est::ActivationOptions fp32 = flash;
  fp32.bytes_per_value = 4;
  EXPECT_GT(est::activation_bytes(shape, fp32).layers,
            19 * est::activation_bytes(shape, flash).layers / 10);
}

TEST(EstimateMemory, HigherStagesNeedLessPerGpu) {
  auto r = request_for("llama2-13b", 8, 2);
  int64_t previous = INT64_MAX;
  for (int stage = 0; stage <= 3; ++stage) {
    auto e = est::estimate_memory(r, {stage, est::Offload::None});
    EXPECT_LT(e.gpu_model_states, previous) << "stage " << stage;
    previous = e.gpu_model_states;
  }
  EXPECT_EQ(est::estimate_memory(r, {0, est::Offload::None}).gpu_model_states,
            20 * est::parameter_count(r.model));
}

// The estimator leaves overlap_comm to the ds_config reader's default: an estimate without it
// equals one given the value a zero_optimization block without the key resolves to, at every
// stage; below stage 3 the value changes the buffers, so a rule restated apart would show.
TEST(EstimateMemory, OverlapDefaultIsTheConfigReaders) {
  auto r = request_for("gpt2", 1, 1);
  for (int stage = 0; stage <= 3; ++stage) {
    const auto config = dsx::config::read_ds_config_text(
        R"({"train_batch_size": 1, "zero_optimization": {"stage": )" + std::to_string(stage) + "}}",
        "test.json", dsx::config::ConfigInputs{});
    r.overlap_comm.reset();
    const auto left_out = est::estimate_memory(r, {stage, est::Offload::None});
    r.overlap_comm = config.zero_optimization.overlap_comm;
    EXPECT_EQ(est::estimate_memory(r, {stage, est::Offload::None}).gpu_buffers, left_out.gpu_buffers)
        << "stage " << stage;
    if (stage < 3) {
      r.overlap_comm = !config.zero_optimization.overlap_comm;
      EXPECT_NE(est::estimate_memory(r, {stage, est::Offload::None}).gpu_buffers, left_out.gpu_buffers)
          << "stage " << stage;
    }
  }
}

TEST(EstimateMemory, Fp32StatesHaveNoMasterCopy) {
  const int64_t P = 1'000'000'000, L = 100'000'000;
  auto z3 = est::model_state_bytes(P, L, est::Precision::Fp32, {4, 1}, {3, est::Offload::None},
                                   true, 1.5);
  EXPECT_EQ(z3.gpu, 8 * L + 12 * P / 4);  // fp32 params + grads of a layer; 4 + 8 Adam per element
  auto z1 = est::model_state_bytes(P, L, est::Precision::Fp32, {4, 1}, {1, est::Offload::None},
                                   true, 1.5);
  EXPECT_EQ(z1.gpu, 8 * P + 8 * P / 4);
}

TEST(EstimateMemory, MaxMicroBatchIsTheLargestThatFits) {
  auto r = request_for("llama2-7b", 8, 1);
  for (auto option : est::zero_options({1, 2, 3}, {est::Offload::None, est::Offload::Optimizer})) {
    auto base = est::estimate_memory(r, option);
    ASSERT_GT(base.max_micro_batch, 0);
    auto at_max = r;
    at_max.activations.micro_batch = base.max_micro_batch;
    EXPECT_TRUE(est::estimate_memory(at_max, option).fits_gpu);
    at_max.activations.micro_batch += 1;
    EXPECT_FALSE(est::estimate_memory(at_max, option).fits_gpu);
  }
}

TEST(EstimateMemory, FewestGpusFitsAndTheNextSmallerDoesNot) {
  auto r = request_for("llama2-70b", 8, 1);
  r.activations.checkpointing = true;  // without it one 4K-token sample needs 102 GiB
  auto option = est::ZeroOption{3, est::Offload::None};
  auto fewest = est::fewest_gpus(r, option);
  ASSERT_TRUE(fewest.has_value());
  EXPECT_EQ(fewest->gpus_per_node, 8);
  EXPECT_GT(fewest->nodes, 1);  // 70B without offload needs more than one node of 80 GB GPUs
  auto trial = r;
  trial.cluster = *fewest;
  EXPECT_TRUE(est::estimate_memory(trial, option).fits());
  trial.cluster.nodes -= 1;
  EXPECT_FALSE(est::estimate_memory(trial, option).fits());
  // Stage 0 never fits: data parallelism does not divide the 1.1 TB of model states.
  EXPECT_FALSE(est::fewest_gpus(r, {0, est::Offload::None}).has_value());
}

TEST(EstimateMemory, CpuLimitIsChecked) {
  auto r = request_for("llama2-7b", 8, 1);
  r.cpu_memory_per_node_bytes = int64_t{64} << 30;
  auto e = est::estimate_memory(r, {2, est::Offload::Optimizer});  // needs 156 GiB of host memory
  EXPECT_TRUE(e.fits_gpu);
  EXPECT_FALSE(e.fits_cpu);
  EXPECT_FALSE(e.fits());
}

TEST(EstimateMemory, OnlyValidStageOffloadPairs) {
  auto options = est::zero_options({0, 1, 2, 3}, {est::Offload::None, est::Offload::Optimizer,
                                                  est::Offload::OptimizerAndParams});
  ASSERT_EQ(options.size(), 8u);  // 0: none; 1, 2: none, optimizer; 3: all three
  for (auto o : options) {
    EXPECT_FALSE(o.stage == 0 && o.offload != est::Offload::None);
    EXPECT_FALSE(o.stage < 3 && o.offload == est::Offload::OptimizerAndParams);
  }
}
