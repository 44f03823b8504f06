// The zero_optimization block as dsx train reads it: the options that change how gradients and
// parameters travel reach ZeRO unchanged, and the keys DeepSpeed honours but dsx cannot use on
// the host are said, once each, with why (never silently dropped).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "engine/training_setup.h"

namespace {

dsx::config::EngineConfig read(const std::string& zero_block) {
  dsx::config::ConfigInputs in;
  in.world_size = 2;
  return dsx::config::read_ds_config_text(
      R"({"train_micro_batch_size_per_gpu": 1, "optimizer": {"type": "AdamW", "params": {"lr": 1e-3}},
          "zero_optimization": )" + zero_block + "}",
      "test.json", in);
}

size_t count_mentions(const std::vector<std::string>& notes, const std::string& key) {
  size_t n = 0;
  for (const std::string& note : notes) n += note.find(key) != std::string::npos;
  return n;
}

TEST(ZeroConfig, TravelOptionsReachZero) {
  std::vector<std::string> notes;
  auto o = dsx::engine::zero_options_from(
      read(R"({"stage": 3, "reduce_scatter": false, "contiguous_gradients": false, "allgather_bucket_size": 4000,
               "reduce_bucket_size": 3000, "stage3_model_persistence_threshold": 5000})"),
      notes);
  EXPECT_EQ(o.stage, 3);
  EXPECT_FALSE(o.reduce_scatter);
  EXPECT_FALSE(o.contiguous_gradients);
  EXPECT_EQ(o.allgather_bucket_size, 4000u);
  EXPECT_EQ(o.reduce_bucket_size, 3000u);
  EXPECT_EQ(o.model_persistence_threshold, 5000u);
  EXPECT_TRUE(notes.empty()) << notes.front();
}

// An optimizer block without params and a kernel's hyper-parameters left as they are give the
// same values: both start from dsx/optimizer_defaults.h (Lion's kernel once had its own).
TEST(ZeroConfig, OptimizerDefaultsAreTheKernelsOwn) {
  auto spec_of = [](const std::string& type) {
    std::vector<std::string> notes;
    return dsx::engine::zero_options_from(
               dsx::config::read_ds_config_text(
                   R"({"train_micro_batch_size_per_gpu": 1, "optimizer": {"type": ")" + type + R"("}})",
                   "test.json", dsx::config::ConfigInputs{}),
               notes)
        .optimizer;
  };
  const dsx::kernels::AdamHyper adam = spec_of("AdamW").adam;
  EXPECT_EQ(adam.lr, dsx::kernels::AdamHyper{}.lr);
  EXPECT_EQ(adam.beta1, dsx::kernels::AdamHyper{}.beta1);
  EXPECT_EQ(adam.beta2, dsx::kernels::AdamHyper{}.beta2);
  EXPECT_EQ(adam.eps, dsx::kernels::AdamHyper{}.eps);
  EXPECT_EQ(adam.lr, 1e-3f);  // DeepSpeed's FusedAdam
  EXPECT_EQ(adam.beta2, 0.999f);
  const dsx::kernels::LambHyper lamb = spec_of("Lamb").lamb;
  EXPECT_EQ(lamb.lr, dsx::kernels::LambHyper{}.lr);
  EXPECT_EQ(lamb.beta2, dsx::kernels::LambHyper{}.beta2);
  EXPECT_EQ(lamb.eps, dsx::kernels::LambHyper{}.eps);
  EXPECT_EQ(lamb.max_coeff, dsx::kernels::LambHyper{}.max_coeff);
  EXPECT_EQ(lamb.min_coeff, dsx::kernels::LambHyper{}.min_coeff);
  const dsx::kernels::LionHyper lion = spec_of("Lion").lion;
  EXPECT_EQ(lion.lr, dsx::kernels::LionHyper{}.lr);
  EXPECT_EQ(lion.beta1, dsx::kernels::LionHyper{}.beta1);
  EXPECT_EQ(lion.beta2, dsx::kernels::LionHyper{}.beta2);
  const dsx::kernels::AdagradHyper adagrad = spec_of("Adagrad").adagrad;
  EXPECT_EQ(adagrad.lr, dsx::kernels::AdagradHyper{}.lr);
  EXPECT_EQ(adagrad.eps, dsx::kernels::AdagradHyper{}.eps);
  EXPECT_EQ(spec_of("SGD").sgd.lr, dsx::kernels::SgdHyper{}.lr);
}

TEST(ZeroConfig, DefaultsSayNothing) {
  for (int stage = 0; stage <= 3; ++stage) {
    std::vector<std::string> notes;
    auto o = dsx::engine::zero_options_from(read(R"({"stage": )" + std::to_string(stage) + "}"), notes);
    EXPECT_TRUE(o.reduce_scatter && o.contiguous_gradients);
    EXPECT_GE(o.model_persistence_threshold, size_t{1} << 62) << "unbounded by default";
    EXPECT_TRUE(notes.empty()) << "stage " << stage << ": " << notes.front();
  }
}

TEST(ZeroConfig, IgnoredKeysAreSaidWithWhy) {
  std::vector<std::string> notes;
  dsx::engine::zero_options_from(
      read(R"({"stage": 2, "round_robin_gradients": true, "use_multi_rank_bucket_allreduce": false,
               "zero_hpz_partition_size": 2, "zero_quantized_gradients": true, "ignore_unused_parameters": false,
               "load_from_fp32_weights": false})"),
      notes);
  for (const char* key : {"round_robin_gradients", "use_multi_rank_bucket_allreduce", "zero_hpz_partition_size",
                          "zero_quantized_weights/zero_quantized_gradients", "ignore_unused_parameters",
                          "load_from_fp32_weights"}) {
    EXPECT_EQ(count_mentions(notes, std::string("zero_optimization.") + key + " changes nothing in dsx: "), 1u)
        << key;
  }
  EXPECT_EQ(notes.size(), 6u);

  std::vector<std::string> stage3;
  dsx::engine::zero_options_from(
      read(R"({"stage": 3, "sub_group_size": 1000, "stage3_use_all_reduce_for_fetch_params": true,
               "round_robin_gradients": true})"),
      stage3);
  EXPECT_EQ(count_mentions(stage3, "sub_group_size"), 1u);
  EXPECT_EQ(count_mentions(stage3, "use_all_reduce_for_fetch_params"), 1u);
  EXPECT_EQ(count_mentions(stage3, "round_robin_gradients"), 0u) << "a stage 1/2 key: stage 3 has no flat partition";
}

}  // namespace

// A 16-bit config is said once, in words that match where the model computes: a GPU model runs
// its matmuls in the 16-bit type, a CPU model in fp32 except where a bf16 kernel exists.
TEST(ZeroConfig, PrecisionNoteSaysWhereTheModelComputes) {
  auto config_with = [](const std::string& precision) {
    return dsx::config::read_ds_config_text(
        R"({"train_micro_batch_size_per_gpu": 1)" + precision + "}", "test.json", dsx::config::ConfigInputs{});
  };
  EXPECT_EQ(dsx::engine::precision_note(config_with(""), false), "");
  EXPECT_EQ(dsx::engine::precision_note(config_with(""), true), "");
  const auto bf16 = config_with(R"(, "bf16": {"enabled": true})");
  const std::string cpu = dsx::engine::precision_note(bf16, false);
  const std::string gpu = dsx::engine::precision_note(bf16, true);
  EXPECT_EQ(cpu.rfind("bf16 on the CPU: ", 0), 0u) << cpu;
  EXPECT_NE(cpu.find("computes in fp32"), std::string::npos) << cpu;
  EXPECT_EQ(gpu.rfind("bf16 on the GPU: ", 0), 0u) << gpu;
  EXPECT_EQ(gpu.find("computes in fp32"), std::string::npos) << gpu;
  EXPECT_NE(gpu.find("matmuls are bf16"), std::string::npos) << gpu;
  const std::string fp16 = dsx::engine::precision_note(config_with(R"(, "fp16": {"enabled": true})"), true);
  EXPECT_NE(fp16.find("matmuls are fp16"), std::string::npos) << fp16;
  EXPECT_NE(fp16.find("loss scaling"), std::string::npos) << fp16;
}
