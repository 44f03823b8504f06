// Every DeepSpeed learning-rate schedule against its formula and the worked cases of
// ref/ds_config.md §8 (cases 20-22), including the "update k uses lr(k-1)" timing.
#include <gtest/gtest.h>

#include <cmath>

#include "dsx/error.h"
#include "engine/schedule/lr_schedule.h"

using namespace dsx::engine;
using dsx::config::SchedulerParams;

TEST(WarmupLR, LinearUpdatesUseThePreviousIteration) {  // case 20
  SchedulerParams p;
  p.warmup_min_lr = 0;
  p.warmup_max_lr = 0.01;
  p.warmup_num_steps = 10;
  p.warmup_type = "linear";
  LrSchedule s("WarmupLR", p, 1e-3);
  // applied update k runs with lr(k - 1)
  const double expected[] = {0, 0, 0.001, 0.002, 0.003, 0.004, 0.005, 0.006, 0.007, 0.008, 0.009, 0.01, 0.01};
  for (int k = 0; k < 13; ++k) EXPECT_NEAR(s.at(k - 1).lr, expected[k], 1e-15) << "update " << k;
}

TEST(WarmupLR, LogWarmup) {
  SchedulerParams p;
  p.warmup_max_lr = 1.0;
  LrSchedule s("WarmupLR", p, 1e-3);
  EXPECT_NEAR(s.at(99).lr, 2.0 / 3.0, 1e-12);  // ln(100)/ln(1000)
  EXPECT_EQ(s.at(-1).lr, 0.0);
  EXPECT_EQ(s.at(5000).lr, 1.0);
}

TEST(WarmupLR, MaxDefaultsToTheOptimizerLr) {
  SchedulerParams p;
  p.warmup_num_steps = 10;
  LrSchedule s("WarmupLR", p, 3e-4);
  EXPECT_DOUBLE_EQ(s.at(10).lr, 3e-4);
}

TEST(WarmupLR, OneStepWarmupIsTwo) {
  SchedulerParams p;
  p.warmup_max_lr = 1.0;
  p.warmup_num_steps = 1;
  p.warmup_type = "linear";
  LrSchedule s("WarmupLR", p, 1.0);
  EXPECT_DOUBLE_EQ(s.at(1).lr, 0.5);  // warm-up is max(2, n) steps
}

TEST(WarmupLR, NonPositiveStepsIsAConfigError) {
  SchedulerParams p;
  p.warmup_num_steps = 0;
  EXPECT_THROW(LrSchedule("WarmupLR", p, 1e-3), dsx::Error);
}

TEST(WarmupDecayLR, WorkedCase) {  // case 21
  SchedulerParams p;
  p.warmup_max_lr = 1e-3;
  p.warmup_num_steps = 10;
  p.total_num_steps = 100;
  LrSchedule s("WarmupDecayLR", p, 42.0);
  EXPECT_NEAR(s.at(55).lr, 5e-4, 1e-15);
  EXPECT_EQ(s.at(100).lr, 0.0);
  EXPECT_EQ(s.at(120).lr, 0.0);
}

TEST(WarmupDecayLR, MaxDefaultsTo1e3NotTheOptimizerLr) {
  SchedulerParams p;
  p.warmup_num_steps = 10;
  p.total_num_steps = 100;
  LrSchedule s("WarmupDecayLR", p, 42.0);
  EXPECT_DOUBLE_EQ(s.at(10).lr, 0.001);
}

TEST(WarmupDecayLR, NeedsTotalSteps) {
  SchedulerParams p;
  EXPECT_THROW(LrSchedule("WarmupDecayLR", p, 1e-3), dsx::Error);
}

TEST(WarmupCosineLR, WorkedCase) {  // case 21
  SchedulerParams p;
  p.total_num_steps = 110;
  p.warmup_num_steps = 10;
  LrSchedule s("WarmupCosineLR", p, 1e-3);
  EXPECT_NEAR(s.at(59).lr, 5.0005e-4, 1e-15);
  EXPECT_EQ(s.at(-1).lr, 0.0);
  EXPECT_NEAR(s.at(500).lr, 1e-7, 1e-18);  // clamped at the end, no rise past total
}

TEST(WarmupCosineLR, WarmupRatio) {
  SchedulerParams p;
  p.total_num_steps = 100;
  p.warmup_num_steps = 10;
  p.warmup_min_ratio = 0.1;
  p.warmup_type = "linear";
  LrSchedule s("WarmupCosineLR", p, 2.0);
  EXPECT_NEAR(s.at(5).lr, 2.0 * (0.1 + 0.9 * 0.5), 1e-15);
}

TEST(OneCycle, WorkedCase) {  // case 22
  SchedulerParams p;
  p.cycle_min_lr = 1e-4;
  p.cycle_max_lr = 1e-3;
  p.cycle_first_step_size = 10;
  p.cycle_second_step_size = 10;
  LrSchedule s("OneCycle", p, 0.0);
  EXPECT_NEAR(s.at(4).lr, 5.5e-4, 1e-15);
  EXPECT_NEAR(s.at(9).lr, 1e-3, 1e-15);
  EXPECT_NEAR(s.at(14).lr, 5.5e-4, 1e-15);
  EXPECT_NEAR(s.at(19).lr, 1e-4, 1e-15);
  EXPECT_NEAR(s.at(25).lr, 1e-4, 1e-15);
  EXPECT_EQ(s.at(4).beta2.value(), 0.99);
  EXPECT_NEAR(s.at(9).beta1.value(), 0.8, 1e-15);   // momentum runs opposite to lr
  EXPECT_NEAR(s.at(19).beta1.value(), 0.9, 1e-15);
}

TEST(OneCycle, DecayAfterTheCycle) {
  SchedulerParams p;
  p.cycle_min_lr = 1e-4;
  p.cycle_max_lr = 1e-3;
  p.cycle_first_step_size = 10;
  p.decay_lr_rate = 0.5;
  p.decay_step_size = 2;
  LrSchedule s("OneCycle", p, 0.0);
  EXPECT_NEAR(s.at(23).lr, 1e-4 / (1 + 0.5 * 4 / 2.0), 1e-18);
}

TEST(OneCycle, Stairs) {
  SchedulerParams p;
  p.cycle_min_lr = 0;
  p.cycle_max_lr = 1;
  p.cycle_first_step_size = 10;
  p.cycle_first_stair_count = 2;
  LrSchedule s("OneCycle", p, 0.0);
  EXPECT_DOUBLE_EQ(s.at(3).lr, 0.0);  // c = 4 -> pos 0.8 -> stair 0
  EXPECT_DOUBLE_EQ(s.at(5).lr, 0.5);  // c = 6 -> pos 1.2 -> stair 1
  EXPECT_DOUBLE_EQ(s.at(9).lr, 1.0);
}

TEST(LRRangeTest, ContinuousAndStaircase) {
  SchedulerParams p;
  p.lr_range_test_min_lr = 1e-3;
  p.lr_range_test_step_size = 10;
  p.lr_range_test_step_rate = 2.0;
  LrSchedule s("LRRangeTest", p, 0.0);
  EXPECT_NEAR(s.at(14).lr, 1e-3 * (1 + 2.0 * 1.5), 1e-15);
  p.lr_range_test_staircase = true;
  LrSchedule t("LRRangeTest", p, 0.0);
  EXPECT_NEAR(t.at(14).lr, 1e-3 * (1 + 2.0 * 1.0), 1e-15);
  EXPECT_DOUBLE_EQ(t.at(-1).lr, 1e-3);
}

TEST(LrSchedule, DefaultsAreTheDsConfigReadersOwn) {
  // No defaults of its own: a schedule built from the reader's params matches one from a file
  // that names nothing but the type.
  const auto read = dsx::config::read_ds_config_text(
      R"({"train_batch_size": 8, "scheduler": {"type": "WarmupLR", "params": {}}})", "inline", {});
  LrSchedule from_file(*read.scheduler.type, read.scheduler.params, 1e-3);
  LrSchedule from_defaults("WarmupLR", SchedulerParams{}, 1e-3);
  for (int64_t it : {-1, 0, 10, 500, 999, 1000, 5000}) EXPECT_EQ(from_file.at(it).lr, from_defaults.at(it).lr);
  EXPECT_NEAR(from_defaults.at(99).lr, 1e-3 * std::log(100.0) / std::log(1000.0), 1e-15);  // 1000 log steps
}

TEST(LrSchedule, WarmupDecayMaxIsTheDsConfigReadersOwn) {
  // WarmupDecayLR's warmup_max_lr the file leaves out: the reader's value and the schedule's
  // fallback are one default, not the optimizer's lr.
  const auto read = dsx::config::read_ds_config_text(
      R"({"train_batch_size": 8, "optimizer": {"type": "Adam", "params": {"lr": 0.5}},
          "scheduler": {"type": "WarmupDecayLR", "params": {"total_num_steps": 2000}}})",
      "inline", {});
  LrSchedule from_file(*read.scheduler.type, read.scheduler.params, read.optimizer.params.lr);
  SchedulerParams unset;
  unset.total_num_steps = 2000;
  LrSchedule from_defaults("WarmupDecayLR", unset, read.optimizer.params.lr);
  for (int64_t it : {-1, 0, 10, 999, 1000, 1500, 2000}) EXPECT_EQ(from_file.at(it).lr, from_defaults.at(it).lr);
  EXPECT_EQ(from_file.at(1000).lr, dsx::config::kWarmupDecayMaxLr);
}

TEST(LrSchedule, ATorchSchedulerIsRefusedByName) {
  try {
    LrSchedule("StepLR", SchedulerParams{}, 1e-3);
    FAIL() << "StepLR was accepted";
  } catch (const dsx::Error& e) {
    EXPECT_NE(std::string(e.what()).find("\"StepLR\""), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("WarmupCosineLR"), std::string::npos) << e.what();
  }
}
