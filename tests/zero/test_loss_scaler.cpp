// The fp16 loss scaler follows DeepSpeed's schedule step by step (ref/ds_config.md §4.2, §8).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "dsx/error.h"
#include "zero/loss_scaler.h"

using dsx::zero::LossScaler;
using dsx::zero::LossScalerConfig;

namespace {

// Runs a pattern of steps ('O' overflow, 'C' clean) and returns the scale after each.
std::vector<double> trace(LossScaler& scaler, const std::string& pattern) {
  std::vector<double> scales;
  for (char c : pattern) {
    scaler.update(c == 'O');
    scales.push_back(scaler.scale());
  }
  return scales;
}

LossScalerConfig zero_config(int power, int64_t window, int hysteresis, bool consecutive = false) {
  return {.initial_scale_power = power, .window = window, .hysteresis = hysteresis,
          .consecutive_hysteresis = consecutive};
}

}  // namespace

TEST(LossScaler, DefaultsMatchDeepSpeed) {
  LossScaler scaler{LossScalerConfig{}};
  EXPECT_EQ(scaler.scale(), 65536.0);
  EXPECT_EQ(scaler.state().hysteresis_left, 2);
}

TEST(LossScaler, ZeroTraceWithHysteresis) {  // ds_config.md §8 case 14
  LossScaler scaler{zero_config(10, 4, 2)};
  EXPECT_EQ(trace(scaler, "OOCCCCCOC"),
            (std::vector<double>{1024, 512, 512, 512, 512, 512, 1024, 1024, 1024}));
}

TEST(LossScaler, WithoutConsecutiveHysteresisRepeatedOverflowsHalve) {
  LossScaler scaler{zero_config(10, 1000, 2)};
  EXPECT_EQ(trace(scaler, "OCOCO"), (std::vector<double>{1024, 1024, 512, 512, 256}));
}

TEST(LossScaler, ConsecutiveHysteresisRefillsOnEveryCleanStep) {
  LossScaler scaler{zero_config(10, 1000, 2, true)};
  EXPECT_EQ(trace(scaler, "OCOCO"), (std::vector<double>{1024, 1024, 1024, 1024, 1024}));
}

TEST(LossScaler, FreshStartDoublesAfterAFullWindow) {
  LossScaler scaler{zero_config(4, 3, 2)};
  // From a fresh start the doubling comes at iteration == window (the 4th clean step).
  EXPECT_EQ(trace(scaler, "CCCCCCC"), (std::vector<double>{16, 16, 16, 32, 32, 32, 64}));
}

TEST(LossScaler, ZeroOverflowAtMinimumIsAnError) {  // ds_config.md §8 case 15
  auto config = zero_config(1, 1000, 1);
  config.min_scale = 1;
  LossScaler scaler{config};
  scaler.update(true);  // 2 -> 1
  EXPECT_EQ(scaler.scale(), 1.0);
  try {
    scaler.update(true);
    FAIL() << "expected an error at the minimum scale";
  } catch (const dsx::Error& e) {
    EXPECT_EQ(e.kind(), dsx::ErrorKind::Numeric);
    EXPECT_NE(std::string(e.what()).find("minimum"), std::string::npos);
  }
}

TEST(LossScaler, StageZeroHasNoHysteresisAndStaysAtMinimum) {
  auto config = zero_config(2, 1000, 2);
  config.zero_semantics = false;
  LossScaler scaler{config};
  EXPECT_EQ(trace(scaler, "OOOO"), (std::vector<double>{2, 1, 1, 1}));
}

TEST(LossScaler, StaticScaleNeverMoves) {
  LossScalerConfig config;
  config.dynamic = false;
  config.static_scale = 128;
  LossScaler scaler{config};
  EXPECT_EQ(trace(scaler, "OCCOC"), (std::vector<double>{128, 128, 128, 128, 128}));
}

TEST(LossScaler, StateRestoresExactly) {
  LossScaler a{zero_config(10, 4, 2)};
  trace(a, "OOCC");
  LossScaler b{zero_config(10, 4, 2)};
  b.restore(a.state());
  EXPECT_EQ(trace(a, "CCCOC"), trace(b, "CCCOC"));
}
