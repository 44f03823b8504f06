// DeepSpeed's dynamic loss scaler (fp16/loss_scaler.py, v0.17.1+), as a small state machine.
#include "zero/loss_scaler.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "dsx/error.h"

namespace dsx::zero {

LossScaler::LossScaler(const LossScalerConfig& config) : config_(config) {
  state_.scale = config.dynamic ? std::ldexp(1.0, config.initial_scale_power) : config.static_scale;
  state_.hysteresis_left = config.hysteresis;
}

LossScaler LossScaler::unit() {
  LossScalerConfig config;
  config.dynamic = false;
  config.static_scale = 1.0;
  return LossScaler(config);
}

void LossScaler::update(bool overflow) {
  if (config_.dynamic) {
    if (overflow) {
      on_overflow();
    } else {
      on_clean_step();
    }
  }
  ++state_.iteration;
}

void LossScaler::on_overflow() {
  const bool halve = !config_.zero_semantics || config_.hysteresis == 1 || state_.hysteresis_left == 1;
  if (halve) {
    if (config_.zero_semantics && state_.scale == config_.min_scale) {
      throw Error(ErrorKind::Numeric,
                  "fp16 gradients overflowed with the loss scale already at its minimum (" +
                      std::to_string(config_.min_scale) +
                      "): the model diverged or its values exceed fp16's range. Lower the learning "
                      "rate, set gradient_clipping, lower fp16.min_loss_scale, or train in bf16.");
    }
    state_.scale = std::max(state_.scale / 2, config_.min_scale);
  } else {
    --state_.hysteresis_left;
  }
  state_.last_overflow = state_.iteration;
}

void LossScaler::on_clean_step() {
  if (config_.consecutive_hysteresis) state_.hysteresis_left = config_.hysteresis;
  // Clean steps since the last overflow, not counting this one: the scale doubles on the step
  // that has a whole number of windows of clean steps behind it.
  const int64_t clean_before = state_.iteration - state_.last_overflow - 1;
  if (clean_before > 0 && clean_before % config_.window == 0) {
    state_.scale *= 2;
    if (!config_.consecutive_hysteresis) state_.hysteresis_left = config_.hysteresis;
  }
}

}  // namespace dsx::zero
