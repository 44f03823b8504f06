// The compatibility cases of ref/ds_config.md §8, read from tests/config/configs/ (the same
// files tools/compat/ds_config_compat.py feeds to DeepSpeed). Numeric traces of the loss scaler
// (§8.14-15) and the LR schedules (§8.20-22) are tested with their implementations in
// tests/zero and tests/engine/test_lr_schedule.cpp; here, that their settings are read right.
#include "tests/config/config_test_util.h"

using namespace dsx::test;
using dsx::config::Source;

TEST(ConfigRefCases, Case01_TrainBatchOnly) {
  auto c = read_case("s8_01_T32_W4");
  EXPECT_EQ(c.train_batch_size, 32);
  EXPECT_EQ(c.train_micro_batch_size_per_gpu, 8);
  EXPECT_EQ(c.gradient_accumulation_steps, 1);
  EXPECT_EQ(c.origin("train_micro_batch_size_per_gpu").source, Source::Derived);
  EXPECT_EQ(c.origin("train_batch_size").source, Source::File);
  auto m = read_case("s8_01_M4_W8");
  EXPECT_EQ(m.train_batch_size, 32);
  EXPECT_EQ(m.gradient_accumulation_steps, 1);
}

TEST(ConfigRefCases, Case02_TwoOfThree) {
  auto a = read_case("s8_02_T64_M4_W4");
  EXPECT_EQ(a.gradient_accumulation_steps, 4);
  auto b = read_case("s8_02_T64_G2_W4");
  EXPECT_EQ(b.train_micro_batch_size_per_gpu, 8);
}

TEST(ConfigRefCases, Case03_NotDivisible) {
  auto e = case_error("s8_03_T30_M4_W2");
  EXPECT_CONTAINS(e, "30 != 4 * 3 * 2");
  EXPECT_CONTAINS(e, "s8_03_T30_M4_W2.json:4:");  // names the file, line and column
}

TEST(ConfigRefCases, Case04_NeitherBatchKey) {
  EXPECT_CONTAINS(case_error("s8_04_G_only"),
                  "Either train_batch_size or train_micro_batch_size_per_gpu needs to be provided");
}

TEST(ConfigRefCases, Case05_AssertionOrder) {
  EXPECT_CONTAINS(case_error("s8_05_T8_M16_W1"), "Gradient accumulation steps: 0 has to be greater than 0");
  EXPECT_CONTAINS(case_error("s8_05_T32_M4_G2_W2"), "32 != 4 * 2 * 2");
}

TEST(ConfigRefCases, Case06_StageDefaults) {
  auto c = read_case("s8_06_zero3_defaults");
  const auto& z = c.zero_optimization;
  EXPECT_EQ(z.stage, 3);
  EXPECT_TRUE(z.overlap_comm);
  EXPECT_EQ(c.origin("zero_optimization.overlap_comm").source, Source::Derived);
  EXPECT_TRUE(z.contiguous_gradients);
  EXPECT_EQ(z.reduce_bucket_size, 500000000);
  EXPECT_EQ(z.prefetch_bucket_size, 50000000);
  EXPECT_EQ(z.param_persistence_threshold, 100000);
  EXPECT_EQ(z.max_live_parameters, 1000000000);
  EXPECT_EQ(z.sub_group_size, 1000000000);
  EXPECT_FALSE(read_case("s8_06_zero2_overlap").zero_optimization.overlap_comm);
}

TEST(ConfigRefCases, Case07_ExtraKeys) {
  auto e = case_error("s8_07_zero_extra_key");
  EXPECT_CONTAINS(e, "zero_optimization.foo");
  EXPECT_CONTAINS(e, "unknown key 'foo'");
  auto c = read_case("s8_07_top_unknown");
  EXPECT_EQ(c.train_batch_size, 8);
  EXPECT_TRUE(has_warning(c, "unknown key 'foo' at the top level"));
}

TEST(ConfigRefCases, Case08_CpuOffloadMapped) {
  auto c = read_case("s8_08_cpu_offload");
  ASSERT_TRUE(c.zero_optimization.offload_optimizer.has_value());
  const auto& o = *c.zero_optimization.offload_optimizer;
  EXPECT_EQ(o.device, "cpu");
  EXPECT_EQ(o.buffer_count, 4);
  EXPECT_EQ(o.ratio, 1.0);
  EXPECT_TRUE(o.pin_memory);  // DeepSpeed >= 0.19.5
  EXPECT_TRUE(has_warning(c, "Config parameter cpu_offload is deprecated use offload_optimizer instead"));
}

TEST(ConfigRefCases, Case09_DeprecatedWithReplacement) {
  EXPECT_CONTAINS(case_error("s8_09_cpu_offload_conflict"),
                  "Cannot provide deprecated parameter 'cpu_offload' and replacing parameter 'offload_optimizer' together");
}

TEST(ConfigRefCases, Case10_PartialOffload) {
  EXPECT_CONTAINS(case_error("s8_10_ratio_stage2"), "Partial offloading only supported for ZeRO Stage 3");
  EXPECT_EQ(read_case("s8_10_ratio_stage3").zero_optimization.offload_optimizer->ratio, 0.5);
  auto e = case_error("s8_10_device_upper");
  EXPECT_CONTAINS(e, "zero_optimization.offload_optimizer.device");
  EXPECT_CONTAINS(e, "case-sensitive");
  EXPECT_CONTAINS(e, "Did you mean \"cpu\"?");
}

TEST(ConfigRefCases, Case11_IntegerCoercion) {
  auto e = case_error("s8_11_prefetch_fraction");
  EXPECT_CONTAINS(e, "zero_optimization.prefetch_bucket_size");
  EXPECT_CONTAINS(e, "expected a whole number, got 15099494.4");
  EXPECT_EQ(read_case("s8_11_prefetch_5e7").zero_optimization.prefetch_bucket_size, 50000000);
  auto a = read_case("s8_11_prefetch_auto");
  EXPECT_EQ(a.zero_optimization.prefetch_bucket_size, 50000000);
  EXPECT_EQ(a.origin("zero_optimization.prefetch_bucket_size").source, Source::Default);
  EXPECT_TRUE(has_warning(a, "--hidden-size"));
}

TEST(ConfigRefCases, Case12_LegacyBooleanZero) {
  auto c = read_case("s8_12_zero_true");
  EXPECT_EQ(c.zero_optimization.stage, 1);
  EXPECT_EQ(c.zero_optimization.allgather_bucket_size, 500000000);
  EXPECT_TRUE(has_warning(c, "is deprecated"));
}

TEST(ConfigRefCases, Case13_Fp16Defaults) {
  auto c = read_case("s8_13_fp16_defaults");
  EXPECT_TRUE(c.fp16.enabled);
  EXPECT_TRUE(c.fp16.dynamic());
  EXPECT_EQ(c.fp16.initial_scale_power, 16);
  EXPECT_EQ(c.fp16.loss_scale_window, 1000);
  EXPECT_EQ(c.fp16.hysteresis, 2);
  EXPECT_EQ(c.fp16.min_loss_scale, 1);
  EXPECT_FALSE(c.fp16.consecutive_hysteresis);
  EXPECT_EQ(c.communication_data_type, "fp16");  // null = the model dtype
}

TEST(ConfigRefCases, Case14_ScalerSettingsRead) {
  auto c = read_case("s8_14_fp16_scaler");
  EXPECT_EQ(c.fp16.initial_scale_power, 10);
  EXPECT_EQ(c.fp16.loss_scale_window, 4);
  EXPECT_EQ(c.fp16.hysteresis, 2);
  EXPECT_EQ(c.zero_optimization.stage, 2);
}

TEST(ConfigRefCases, Case16_PrecisionContradictions) {
  EXPECT_CONTAINS(case_error("s8_16_fp16_bf16"), "cannot be simultaneously enabled");
  EXPECT_CONTAINS(case_error("s8_16_window0"), "fp16.loss_scale_window");
  auto c = read_case("s8_16_window0_static");
  EXPECT_EQ(c.fp16.loss_scale, 128);
  EXPECT_FALSE(c.fp16.dynamic());
}

TEST(ConfigRefCases, Case17_Bf16Names) {
  EXPECT_CONTAINS(case_error("s8_17_bf16_check_overflow"), "unknown key 'check_overflow' in bf16");
  EXPECT_TRUE(read_case("s8_17_bfloat16").bf16.enabled);
  EXPECT_FALSE(read_case("s8_17_bf16_off_bfloat16_on").bf16.enabled);
}

TEST(ConfigRefCases, Case18_OptimizerNames) {
  auto c = read_case("s8_18_adam_upper");
  EXPECT_EQ(c.optimizer.name, "adam");
  EXPECT_TRUE(c.optimizer.params.adam_w_mode);  // "Adam" decays like AdamW by default
  EXPECT_DOUBLE_EQ(c.optimizer.params.weight_decay, 0.01);
  EXPECT_FALSE(read_case("s8_18_adam_l2").optimizer.params.adam_w_mode);
  EXPECT_CONTAINS(case_error("s8_18_sgd_lower"), "sgd is not a supported DeepSpeed Optimizer");
  EXPECT_CONTAINS(case_error("s8_18_sgd_lower"), "Did you mean 'SGD'?");
  auto sgd = read_case("s8_18_sgd_torch");
  EXPECT_EQ(sgd.optimizer.name, "SGD");
  EXPECT_DOUBLE_EQ(sgd.optimizer.params.momentum, 0.9);
  EXPECT_CONTAINS(case_error("s8_18_sgd_zero1"), "zero_allow_untested_optimizer");
  EXPECT_EQ(read_case("s8_18_sgd_zero1_allowed").zero_optimization.stage, 1);
}

TEST(ConfigRefCases, Case19_Clipping) {
  auto e = case_error("s8_19_max_grad_norm");
  EXPECT_CONTAINS(e, "optimizer.params.max_grad_norm");
  EXPECT_CONTAINS(e, "gradient_clipping");
  auto c = read_case("s8_19_no_clipping");
  EXPECT_DOUBLE_EQ(c.gradient_clipping, 1.0);
  EXPECT_EQ(c.origin("gradient_clipping").source, Source::Default);
}

TEST(ConfigRefCases, Case20to22_ScheduleParamsRead) {
  auto w = read_case("s8_20_warmup_linear");
  EXPECT_EQ(*w.scheduler.type, "WarmupLR");
  EXPECT_EQ(w.scheduler.params.warmup_type, "linear");
  EXPECT_EQ(w.scheduler.params.warmup_num_steps, 10);
  EXPECT_DOUBLE_EQ(*w.scheduler.params.warmup_max_lr, 0.01);
  auto d = read_case("s8_21_warmup_decay");
  EXPECT_EQ(*d.scheduler.params.total_num_steps, 100);
  auto cos = read_case("s8_21_warmup_cosine");
  EXPECT_EQ(*cos.scheduler.params.total_num_steps, 110);
  EXPECT_DOUBLE_EQ(cos.scheduler.params.cos_min_ratio, 0.0001);
  auto one = read_case("s8_22_one_cycle");
  EXPECT_DOUBLE_EQ(*one.scheduler.params.cycle_min_lr, 1e-4);
  EXPECT_EQ(*one.scheduler.params.cycle_second_step_size, 10);
  EXPECT_EQ(*one.scheduler.params.cycle_second_stair_count, 0);  // null = first stair count
}

TEST(ConfigRefCases, Case23_EnumSpellings) {
  EXPECT_EQ(read_case("s8_23_comm_fp16_upper").communication_data_type, "fp16");
  EXPECT_CONTAINS(case_error("s8_23_comm_float16"), "communication_data_type");
  EXPECT_EQ(read_case("s8_23_tag_fail").checkpoint.tag_validation, "FAIL");
  EXPECT_CONTAINS(case_error("s8_23_tag_strict"), "checkpoint.tag_validation");
}

TEST(ConfigRefCases, Case24_DuplicateKeys) {
  auto e = case_error("s8_24_duplicate");
  EXPECT_CONTAINS(e, "Duplicate keys in DeepSpeed config: ['train_batch_size']");
  EXPECT_CONTAINS(e, "s8_24_duplicate.json:6:3");
}

TEST(ConfigRefCases, Case25_MonitorAndAmp) {
  auto e = case_error("s8_25_tensorboard_null_path");
  EXPECT_CONTAINS(e, "tensorboard.output_path");
  EXPECT_CONTAINS(e, "expected a string, got null");
  // DeepSpeed 0.19.8 removed Apex AMP: any amp block is refused (older releases: KeyError 'enabled').
  EXPECT_CONTAINS(case_error("s8_25_amp_no_enabled"), "'amp' is no longer supported by DeepSpeed");
}
