// The arithmetic of DeepSpeed's learning-rate schedules (facts: ref/ds_config.md §3.3).
#include "engine/schedule/lr_schedule.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <utility>

#include "dsx/error.h"

namespace dsx::engine {
namespace {

// DeepSpeed never warms up over fewer than 2 steps (log of 1 would divide by zero).
int64_t effective_warmup(int64_t steps) { return std::max<int64_t>(2, steps); }

using config::SchedulerParams;

// Fraction of the warm-up done at iteration `it` (0 <= it < warmup); warmup_type "log" or "linear".
double warmup_fraction(const std::string& type, int64_t it, int64_t warmup) {
  if (type == "linear") return static_cast<double>(it) / static_cast<double>(warmup);
  return std::log(static_cast<double>(it + 1)) / std::log(static_cast<double>(warmup));
}

double warmup_lr(const SchedulerParams& p, double max_lr, int64_t it) {
  const int64_t warmup = effective_warmup(p.warmup_num_steps);
  if (it < 0) return p.warmup_min_lr;
  if (it < warmup) return p.warmup_min_lr + (max_lr - p.warmup_min_lr) * warmup_fraction(p.warmup_type, it, warmup);
  return max_lr;
}

ScheduleValue at_warmup(const SchedulerParams& p, double optimizer_lr, int64_t it) {
  return {warmup_lr(p, p.warmup_max_lr.value_or(optimizer_lr), it), {}, {}};
}

ScheduleValue at_warmup_decay(const SchedulerParams& p, int64_t it) {
  const double max_lr = p.warmup_max_lr.value_or(config::kWarmupDecayMaxLr);
  const int64_t warmup = effective_warmup(p.warmup_num_steps);
  const int64_t total = p.total_num_steps.value_or(0);
  if (it < warmup) return {warmup_lr(p, max_lr, it), {}, {}};
  const double gamma = std::max(0.0, static_cast<double>(total - it) /
                                         static_cast<double>(std::max<int64_t>(1, total - warmup)));
  return {p.warmup_min_lr + (max_lr - p.warmup_min_lr) * gamma, {}, {}};
}

ScheduleValue at_warmup_cosine(const SchedulerParams& p, double base_lr, int64_t it) {
  const int64_t warmup = effective_warmup(p.warmup_num_steps);
  const int64_t total = p.total_num_steps.value_or(0);
  double ratio;
  if (it < 0) {
    ratio = 0.0;
  } else if (it < warmup) {
    ratio = p.warmup_min_ratio + (1.0 - p.warmup_min_ratio) * warmup_fraction(p.warmup_type, it, warmup);
  } else {
    const double progress = std::min(1.0, static_cast<double>(it - warmup + 1) /
                                              static_cast<double>(std::max<int64_t>(1, total - warmup)));
    ratio = std::max(0.0, p.cos_min_ratio + (1.0 - p.cos_min_ratio) *
                                                (1.0 + std::cos(std::numbers::pi * progress)) / 2.0);
  }
  return {base_lr * ratio, {}, {}};
}

ScheduleValue at_one_cycle(const SchedulerParams& p, int64_t it) {
  const double min_lr = p.cycle_min_lr.value_or(0.0), max_lr = p.cycle_max_lr.value_or(0.0);
  const int64_t s1 = p.cycle_first_step_size;
  const int64_t s2 = p.cycle_second_step_size.value_or(s1);
  const int64_t total = s1 + s2;
  ScheduleValue v;
  if (it < total) {
    const int64_t n = it + 1;
    const double ratio = static_cast<double>(s1) / static_cast<double>(total);
    const double cycle = static_cast<double>(n) / static_cast<double>(total);
    const double x = cycle - std::floor(cycle);
    double scale = x <= ratio ? x / ratio : (x - 1.0) / (ratio - 1.0);
    // Stairs: the current half of the cycle climbs or descends in k equal steps.
    const int64_t c = n % total;
    const int64_t k = c <= s1 ? p.cycle_first_stair_count : p.cycle_second_stair_count.value_or(p.cycle_first_stair_count);
    if (k > 0) {
      const double pos = c <= s1 ? static_cast<double>(c * k) / static_cast<double>(s1)
                                 : static_cast<double>((total - c) * k) / static_cast<double>(s2);
      scale = std::floor(pos) / static_cast<double>(k);
    }
    v.lr = min_lr + (max_lr - min_lr) * scale;
    if (p.cycle_momentum) v.beta1 = p.cycle_max_mom - (p.cycle_max_mom - p.cycle_min_mom) * scale;
  } else {
    const double after = static_cast<double>(it - total + 1);
    v.lr = min_lr;
    if (p.decay_step_size != 0 && p.decay_lr_rate != 0.0) {
      v.lr = min_lr / (1.0 + p.decay_lr_rate * after / static_cast<double>(p.decay_step_size));
    }
    if (p.cycle_momentum) {
      v.beta1 = p.cycle_max_mom;
      if (p.decay_step_size != 0) {
        v.beta1 = p.cycle_max_mom * (1.0 + p.decay_mom_rate * after / static_cast<double>(p.decay_step_size));
      }
    }
  }
  if (p.cycle_momentum) v.beta2 = 0.99;  // DeepSpeed overwrites the second beta with 0.99
  return v;
}

ScheduleValue at_range_test(const SchedulerParams& p, int64_t it) {
  double q = static_cast<double>(it + 1) / static_cast<double>(p.lr_range_test_step_size);
  if (p.lr_range_test_staircase) q = std::floor(q);
  return {p.lr_range_test_min_lr * (1.0 + p.lr_range_test_step_rate * q), {}, {}};
}

void require(bool ok, const std::string& message) {
  if (!ok) throw Error(ErrorKind::Config, "scheduler.params: " + message);
}

ScheduleType type_named(const std::string& type) {
  static const std::pair<const char*, ScheduleType> types[] = {
      {"WarmupLR", ScheduleType::WarmupLR},       {"WarmupDecayLR", ScheduleType::WarmupDecayLR},
      {"WarmupCosineLR", ScheduleType::WarmupCosineLR}, {"OneCycle", ScheduleType::OneCycle},
      {"LRRangeTest", ScheduleType::LRRangeTest}};
  for (const auto& [name, t] : types)
    if (type == name) return t;
  throw Error(ErrorKind::Unsupported, "scheduler.type \"" + type +
                                          "\" (a torch.optim.lr_scheduler class) is not available in dsx; use "
                                          "WarmupLR, WarmupDecayLR, WarmupCosineLR, OneCycle or LRRangeTest");
}

void validate(ScheduleType type, const SchedulerParams& p) {
  switch (type) {
    case ScheduleType::WarmupLR:
      require(p.warmup_num_steps > 0, "warmup_num_steps must be a positive integer");
      break;
    case ScheduleType::WarmupDecayLR:
    case ScheduleType::WarmupCosineLR:
      require(p.warmup_num_steps > 0, "warmup_num_steps must be a positive integer");
      require(p.total_num_steps.value_or(0) > 0,
              std::string(type == ScheduleType::WarmupDecayLR ? "WarmupDecayLR" : "WarmupCosineLR") +
                  " needs total_num_steps (a positive integer)");
      break;
    case ScheduleType::OneCycle:
      require(p.cycle_first_step_size > 0, "cycle_first_step_size must be > 0");
      require(p.cycle_second_step_size.value_or(1) >= 0, "cycle_second_step_size must be >= 0");
      break;
    case ScheduleType::LRRangeTest:
      require(p.lr_range_test_step_size > 0, "lr_range_test_step_size must be a positive integer");
      break;
  }
}

}  // namespace

LrSchedule::LrSchedule(const std::string& type, config::SchedulerParams params, double optimizer_lr)
    : type_(type_named(type)), params_(std::move(params)), optimizer_lr_(optimizer_lr) {
  validate(type_, params_);
}

ScheduleValue LrSchedule::at(int64_t it) const {
  switch (type_) {
    case ScheduleType::WarmupLR: return at_warmup(params_, optimizer_lr_, it);
    case ScheduleType::WarmupDecayLR: return at_warmup_decay(params_, it);
    case ScheduleType::WarmupCosineLR: return at_warmup_cosine(params_, optimizer_lr_, it);
    case ScheduleType::OneCycle: return at_one_cycle(params_, it);
    case ScheduleType::LRRangeTest: return at_range_test(params_, it);
  }
  return {};
}

const char* LrSchedule::type_name() const {
  static const char* names[] = {"WarmupLR", "WarmupDecayLR", "WarmupCosineLR", "OneCycle", "LRRangeTest"};
  return names[static_cast<int>(type_)];
}

}  // namespace dsx::engine
