// Loss scaling for fp16 training, with DeepSpeed's exact state machine (v0.17.1 and later), so a
// ds_config's fp16 block behaves as in DeepSpeed step by step. bf16 and fp32 use a fixed scale 1.
//
// Two flavours, as in DeepSpeed:
//   ZeRO (stages 1-3): hysteresis delays halving; an overflow at min_loss_scale is an error.
//   no ZeRO (stage 0): no hysteresis; at min_loss_scale the scale stays and training goes on.
//
// Use: backward runs with scale(); after the overflow check of that step, call update(overflow).
// The gradients of that step are unscaled with the scale backward used (read before update()).
// DeepSpeed updates the scaler first and unscales with the *new* scale, so on a doubling step its
// gradients come out half size; dsx deliberately does not copy that (see docs/zero.md).
#pragma once

#include <cstdint>

#include "config/loss_scaling.h"

namespace dsx::zero {

struct LossScalerConfig {
  bool dynamic = true;          // fp16.loss_scale == 0
  double static_scale = 1.0;    // fp16.loss_scale when > 0; 1.0 for bf16/fp32
  // The ds_config's defaults (config/loss_scaling.h) unless the fp16 block says otherwise.
  int initial_scale_power = static_cast<int>(config::Fp16LossScaling{}.initial_scale_power);
  int64_t window = config::Fp16LossScaling{}.loss_scale_window;
  int hysteresis = static_cast<int>(config::Fp16LossScaling{}.hysteresis);
  bool consecutive_hysteresis = config::Fp16LossScaling{}.consecutive_hysteresis;
  double min_scale = static_cast<double>(config::Fp16LossScaling{}.min_loss_scale);
  bool zero_semantics = true;   // hysteresis + error at the minimum (ZeRO 1-3) or neither (stage 0)
};

// Everything needed to resume the scaler exactly (saved in checkpoints).
struct LossScalerState {
  double scale = 1.0;
  int64_t iteration = 0;       // optimizer steps seen, applied or skipped
  int64_t last_overflow = -1;  // iteration of the last overflow
  int hysteresis_left = 0;
};

class LossScaler {
 public:
  explicit LossScaler(const LossScalerConfig& config);
  // A fixed scale of 1: bf16 and fp32 training.
  static LossScaler unit();

  double scale() const { return state_.scale; }
  bool dynamic() const { return config_.dynamic; }
  // Records the outcome of one optimizer step. Throws dsx::Error(Numeric) when a ZeRO run
  // overflows with the scale already at min_loss_scale.
  void update(bool overflow);

  const LossScalerState& state() const { return state_; }
  void restore(const LossScalerState& state) { state_ = state; }

 private:
  void on_overflow();
  void on_clean_step();

  LossScalerConfig config_;
  LossScalerState state_;
};

}  // namespace dsx::zero
