// DeepSpeed's ZeRO rule for unscaling and clipping, shared by the host (the step's result, the
// CPU path) and the device kernel that computes the optimizer's gradient factor after the norm's
// allreduce (kernels/cuda/mixed_precision.h: zero_grad_factor), so both give the same bits:
//   norm = sqrt(sum_sq) / loss_scale; c = (norm + 1e-6) / max_norm; clip when c > 1,
// and the gradients are multiplied by 1 / (loss_scale * c), all in double, rounded once to fp32.
#pragma once

#include <cmath>

#include "kernels/dtype.h"

namespace dsx::kernels {

// Where the global sum of squares lies in device memory: a double (one rank holds every
// gradient) or the float that the ranks' fp32 norm allreduce added.
struct DeviceSumOfSquares {
  const void* data = nullptr;
  bool fp32 = false;
};

// The clip divisor c of the rule above; 1 when it does not clip: clipping off (max_norm <= 0),
// a norm within max_norm, or a non-finite sum (an overflow the caller skips or lets through).
DSX_HD double zero_clip_divisor(double sum_sq, double loss_scale, double max_norm) {
  const bool finite = sum_sq <= 1.7976931348623157e308;  // false for +Inf and NaN
  if (!(max_norm > 0.0) || !finite) return 1.0;
  const double c = (sqrt(sum_sq) / loss_scale + 1e-6) / max_norm;
  return c > 1.0 ? c : 1.0;
}

// The factor the optimizer multiplies every gradient by: unscaling and clipping in one.
DSX_HD float zero_grad_factor(double sum_sq, double loss_scale, double max_norm) {
  return static_cast<float>(1.0 / (loss_scale * zero_clip_divisor(sum_sq, loss_scale, max_norm)));
}

}  // namespace dsx::kernels
