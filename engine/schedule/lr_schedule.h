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

#include "config/ds_config.h"

namespace dsx::engine {

enum class ScheduleType { WarmupLR, WarmupDecayLR, WarmupCosineLR, OneCycle, LRRangeTest };

// What the optimizer should use at one iteration. OneCycle also drives Adam's betas.
struct ScheduleValue {
  double lr = 0.0;
  std::optional<double> beta1;
  std::optional<double> beta2;
};

class LrSchedule {
 public:
  // `type` is one of DeepSpeed's five names and `params` the scheduler block's params as the
  // ds_config reader filled them (their defaults are written there, once). `optimizer_lr` is the
  // optimizer block's lr (the base of WarmupLR and WarmupCosineLR). Throws dsx::Error: Config for
  // parameters DeepSpeed rejects, Unsupported for another type (a torch scheduler).
  LrSchedule(const std::string& type, config::SchedulerParams params, double optimizer_lr);

  ScheduleValue at(int64_t iteration) const;
  const char* type_name() const;

 private:
  ScheduleType type_;
  config::SchedulerParams params_;
  double optimizer_lr_;
};

}  // namespace dsx::engine
