// DeepSpeed's five learning-rate schedules (runtime/lr_schedules.py), as pure functions of the
// iteration, so that a ds_config's scheduler block gives the same learning rate at every step.
//
// Timing, as in DeepSpeed: the schedule starts at iteration -1 and advances once per *applied*
// optimizer step (not for overflow-skipped steps), so applied update k (0-based) uses lr(k - 1).
// Engine keeps `last_iteration` and asks `at(last_iteration)`.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <variant>

namespace dsx::engine {

enum class WarmupType { Log, Linear };

struct WarmupLRParams {
  double warmup_min_lr = 0.0;
  std::optional<double> warmup_max_lr;  // absent: the optimizer's lr
  int64_t warmup_num_steps = 1000;
  WarmupType warmup_type = WarmupType::Log;
};

struct WarmupDecayLRParams {
  WarmupLRParams warmup;  // warmup_max_lr absent means 0.001 here, not the optimizer's lr
  int64_t total_num_steps = 0;
};

struct WarmupCosineLRParams {
  int64_t total_num_steps = 0;
  double warmup_min_ratio = 0.0;
  int64_t warmup_num_steps = 1000;
  double cos_min_ratio = 0.0001;
  WarmupType warmup_type = WarmupType::Log;
};

struct OneCycleParams {
  double cycle_min_lr = 0.0;
  double cycle_max_lr = 0.0;
  double decay_lr_rate = 0.0;
  int64_t cycle_first_step_size = 2000;
  std::optional<int64_t> cycle_second_step_size;  // absent: first
  int64_t cycle_first_stair_count = 0;
  std::optional<int64_t> cycle_second_stair_count;  // absent: first
  int64_t decay_step_size = 0;
  bool cycle_momentum = true;
  double cycle_min_mom = 0.8;
  double cycle_max_mom = 0.9;
  double decay_mom_rate = 0.0;
};

struct LRRangeTestParams {
  double lr_range_test_min_lr = 1e-3;
  int64_t lr_range_test_step_size = 2000;
  double lr_range_test_step_rate = 1.0;
  bool lr_range_test_staircase = false;
};

using ScheduleParams = std::variant<WarmupLRParams, WarmupDecayLRParams, WarmupCosineLRParams,
                                    OneCycleParams, LRRangeTestParams>;

// What the optimizer should use at one iteration. OneCycle also drives Adam's betas.
struct ScheduleValue {
  double lr = 0.0;
  std::optional<double> beta1;
  std::optional<double> beta2;
};

class LrSchedule {
 public:
  // `optimizer_lr` is the optimizer block's lr (the base of WarmupLR and WarmupCosineLR).
  // Throws dsx::Error(Config) for parameters DeepSpeed rejects.
  LrSchedule(ScheduleParams params, double optimizer_lr);

  ScheduleValue at(int64_t iteration) const;
  const char* type_name() const;

 private:
  ScheduleParams params_;
  double optimizer_lr_;
};

}  // namespace dsx::engine
