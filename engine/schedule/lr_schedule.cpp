// The arithmetic of DeepSpeed's learning-rate schedules (facts: ref/ds_config.md §3.3).
#include "engine/schedule/lr_schedule.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "dsx/error.h"

namespace dsx::engine {
namespace {

// DeepSpeed never warms up over fewer than 2 steps (log of 1 would divide by zero).
int64_t effective_warmup(int64_t steps) { return std::max<int64_t>(2, steps); }

// Fraction of the warm-up done at iteration `it` (0 <= it < warmup).
double warmup_fraction(WarmupType type, int64_t it, int64_t warmup) {
  if (type == WarmupType::Linear) return static_cast<double>(it) / static_cast<double>(warmup);
  return std::log(static_cast<double>(it + 1)) / std::log(static_cast<double>(warmup));
}

double warmup_lr(const WarmupLRParams& p, double max_lr, int64_t it) {
  const int64_t warmup = effective_warmup(p.warmup_num_steps);
  if (it < 0) return p.warmup_min_lr;
  if (it < warmup) return p.warmup_min_lr + (max_lr - p.warmup_min_lr) * warmup_fraction(p.warmup_type, it, warmup);
  return max_lr;
}

ScheduleValue at_warmup(const WarmupLRParams& p, double optimizer_lr, int64_t it) {
  return {warmup_lr(p, p.warmup_max_lr.value_or(optimizer_lr), it), {}, {}};
}

ScheduleValue at_warmup_decay(const WarmupDecayLRParams& p, int64_t it) {
  const double max_lr = p.warmup.warmup_max_lr.value_or(0.001);
  const int64_t warmup = effective_warmup(p.warmup.warmup_num_steps);
  if (it < warmup) return {warmup_lr(p.warmup, max_lr, it), {}, {}};
  const double gamma = std::max(0.0, static_cast<double>(p.total_num_steps - it) /
                                         static_cast<double>(std::max<int64_t>(1, p.total_num_steps - warmup)));
  return {p.warmup.warmup_min_lr + (max_lr - p.warmup.warmup_min_lr) * gamma, {}, {}};
}

ScheduleValue at_warmup_cosine(const WarmupCosineLRParams& p, double base_lr, int64_t it) {
  const int64_t warmup = effective_warmup(p.warmup_num_steps);
  double ratio;
  if (it < 0) {
    ratio = 0.0;
  } else if (it < warmup) {
    ratio = p.warmup_min_ratio + (1.0 - p.warmup_min_ratio) * warmup_fraction(p.warmup_type, it, warmup);
  } else {
    const double progress = std::min(1.0, static_cast<double>(it - warmup + 1) /
                                              static_cast<double>(std::max<int64_t>(1, p.total_num_steps - warmup)));
    ratio = std::max(0.0, p.cos_min_ratio + (1.0 - p.cos_min_ratio) *
                                                (1.0 + std::cos(std::numbers::pi * progress)) / 2.0);
  }
  return {base_lr * ratio, {}, {}};
}

ScheduleValue at_one_cycle(const OneCycleParams& p, int64_t it) {
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
    v.lr = p.cycle_min_lr + (p.cycle_max_lr - p.cycle_min_lr) * scale;
    if (p.cycle_momentum) v.beta1 = p.cycle_max_mom - (p.cycle_max_mom - p.cycle_min_mom) * scale;
  } else {
    const double after = static_cast<double>(it - total + 1);
    v.lr = p.cycle_min_lr;
    if (p.decay_step_size != 0 && p.decay_lr_rate != 0.0) {
      v.lr = p.cycle_min_lr / (1.0 + p.decay_lr_rate * after / static_cast<double>(p.decay_step_size));
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

ScheduleValue at_range_test(const LRRangeTestParams& p, int64_t it) {
  double q = static_cast<double>(it + 1) / static_cast<double>(p.lr_range_test_step_size);
  if (p.lr_range_test_staircase) q = std::floor(q);
  return {p.lr_range_test_min_lr * (1.0 + p.lr_range_test_step_rate * q), {}, {}};
}

void require(bool ok, const std::string& message) {
  if (!ok) throw Error(ErrorKind::Config, "scheduler.params: " + message);
}

void validate(const ScheduleParams& params) {
  if (auto* w = std::get_if<WarmupLRParams>(&params)) {
    require(w->warmup_num_steps > 0, "warmup_num_steps must be a positive integer");
  } else if (auto* d = std::get_if<WarmupDecayLRParams>(&params)) {
    require(d->warmup.warmup_num_steps > 0, "warmup_num_steps must be a positive integer");
    require(d->total_num_steps > 0, "WarmupDecayLR needs total_num_steps (a positive integer)");
  } else if (auto* c = std::get_if<WarmupCosineLRParams>(&params)) {
    require(c->warmup_num_steps > 0, "warmup_num_steps must be a positive integer");
    require(c->total_num_steps > 0, "WarmupCosineLR needs total_num_steps (a positive integer)");
  } else if (auto* o = std::get_if<OneCycleParams>(&params)) {
    require(o->cycle_first_step_size > 0, "cycle_first_step_size must be > 0");
    require(o->cycle_second_step_size.value_or(1) >= 0, "cycle_second_step_size must be >= 0");
  } else if (auto* r = std::get_if<LRRangeTestParams>(&params)) {
    require(r->lr_range_test_step_size > 0, "lr_range_test_step_size must be a positive integer");
  }
}

}  // namespace

LrSchedule::LrSchedule(ScheduleParams params, double optimizer_lr)
    : params_(std::move(params)), optimizer_lr_(optimizer_lr) {
  validate(params_);
}

ScheduleValue LrSchedule::at(int64_t it) const {
  struct Visitor {
    double base;
    int64_t it;
    ScheduleValue operator()(const WarmupLRParams& p) const { return at_warmup(p, base, it); }
    ScheduleValue operator()(const WarmupDecayLRParams& p) const { return at_warmup_decay(p, it); }
    ScheduleValue operator()(const WarmupCosineLRParams& p) const { return at_warmup_cosine(p, base, it); }
    ScheduleValue operator()(const OneCycleParams& p) const { return at_one_cycle(p, it); }
    ScheduleValue operator()(const LRRangeTestParams& p) const { return at_range_test(p, it); }
  };
  return std::visit(Visitor{optimizer_lr_, it}, params_);
}

const char* LrSchedule::type_name() const {
  static const char* names[] = {"WarmupLR", "WarmupDecayLR", "WarmupCosineLR", "OneCycle", "LRRangeTest"};
  return names[params_.index()];
}

}  // namespace dsx::engine
