// The element formulas of the optimizers, shared by the CPU loops (kernels/cpu/) and the CUDA
// kernels (kernels/cuda/), so the CPU tests check the arithmetic the GPU runs. Also the
// hyper-parameters (named as in DeepSpeed's "optimizer.params") and the per-step coefficients the
// host derives from them once per call. Kernels are stateless: the caller owns the step count.
//
// Order of operations follows DeepSpeed's CPU kernels (csrc/includes/cpu_adam.h and friends), so
// results can be compared with DeepSpeedCPUAdam element by element.
//
// NaN/Inf: nothing is checked here, as in DeepSpeed's fused and CPU optimizers: a NaN or Inf in a
// gradient flows into the moments and the parameter (Lion: into m only; its sign step treats NaN
// as "not positive" and moves by +lr, like DeepSpeed's). Skipping the step on overflow is the
// caller's job (kernels/mixed_precision.h: unscale_and_check).
#pragma once

#include <cmath>
#include <cstdint>

#include "dsx/optimizer_defaults.h"
#include "kernels/dtype.h"

namespace dsx::kernels {

// ---- hyper-parameters (DeepSpeed names and defaults) ----

struct AdamHyper {
  float lr = float(optimizer_defaults::kLr);
  float beta1 = float(optimizer_defaults::kBeta1), beta2 = float(optimizer_defaults::kBeta2);  // "betas"
  float eps = float(optimizer_defaults::kEps);
  float weight_decay = 0.0f;
  bool adam_w_mode = true;  // true: decoupled decay (AdamW); false: L2 added to the gradient
  bool bias_correction = true;
};

struct LambHyper {
  float lr = float(optimizer_defaults::kLr);
  float beta1 = float(optimizer_defaults::kBeta1), beta2 = float(optimizer_defaults::kBeta2);
  float eps = float(optimizer_defaults::kEps);
  float weight_decay = 0.0f;
  bool bias_correction = true;
  float max_coeff = float(optimizer_defaults::kLambMaxCoeff);  // clamp of the trust ratio
  float min_coeff = float(optimizer_defaults::kLambMinCoeff);
  bool eps_inside_sqrt = false;                // DeepSpeed's adam mode 0: sqrt(v + eps)
};

struct LionHyper {
  float lr = float(optimizer_defaults::kLr);
  float beta1 = float(optimizer_defaults::kBeta1), beta2 = float(optimizer_defaults::kBeta2);
  float weight_decay = 0.0f;
};

struct SgdHyper {  // torch.optim.SGD semantics, which DeepSpeed uses
  float lr = float(optimizer_defaults::kLr);
  float momentum = 0.0f;
  float dampening = 0.0f;
  float weight_decay = 0.0f;
  bool nesterov = false;
};

struct AdagradHyper {  // torch.optim.Adagrad with lr_decay 0 and initial_accumulator_value 0
  float lr = float(optimizer_defaults::kAdagradLr);
  float eps = float(optimizer_defaults::kAdagradEps);
  float weight_decay = 0.0f;
};

// ---- per-step coefficients, derived on the host once per call ----

// `grad_factor` multiplies every gradient first: 1 / (loss_scale * clip_coefficient) folds
// unscaling and clipping into the optimizer pass. 1 leaves the gradient as it is.

// The device kernels' form of it: `host` times the fp32 value at `device` (device memory; null
// means 1), which a kernel computed after the norm's allreduce (kernels/clip_math.h), so the step
// needs no host read of the clip coefficient. Converts from a plain host float. applied() reads
// `device`: only in a kernel or in stream order on a host-memory device.
struct GradFactor {
  float host = 1.0f;
  const float* device = nullptr;
  DSX_HD GradFactor(float factor = 1.0f, const float* on_device = nullptr)  // NOLINT: from float
      : host(factor), device(on_device) {}
  DSX_HD float applied() const { return device ? host * *device : host; }
};

struct AdamCoeffs {
  float beta1, beta2, one_minus_beta1, one_minus_beta2, eps;
  float step_size;     // -lr / bias_correction1
  float inv_sqrt_bc2;  // 1 / sqrt(bias_correction2)
  float l2_decay;      // weight_decay when it is added to the gradient, else 0
  float neg_lr_decay;  // -lr * weight_decay when decoupled, else 0
  float grad_factor;
};

// 1 - beta^step, Adam's and LAMB's bias correction at `step`; 1 without bias correction.
inline double bias_correction(bool corrected, float beta, int64_t step) {
  return corrected ? 1.0 - std::pow(double(beta), double(step)) : 1.0;
}

// The betas and their complements, as Adam's and LAMB's fused steps take them.
template <class Coeffs, class Hyper>
void set_betas(Coeffs& c, const Hyper& h) {
  c.beta1 = h.beta1, c.beta2 = h.beta2;
  c.one_minus_beta1 = 1.0f - h.beta1, c.one_minus_beta2 = 1.0f - h.beta2;
}

inline AdamCoeffs adam_coeffs(const AdamHyper& h, int64_t step, float grad_factor) {
  const double bc1 = bias_correction(h.bias_correction, h.beta1, step);
  const double bc2 = bias_correction(h.bias_correction, h.beta2, step);
  AdamCoeffs c;
  set_betas(c, h);
  c.eps = h.eps;
  c.step_size = static_cast<float>(-double(h.lr) / bc1);
  c.inv_sqrt_bc2 = static_cast<float>(1.0 / std::sqrt(bc2));
  c.l2_decay = h.adam_w_mode ? 0.0f : h.weight_decay;
  c.neg_lr_decay = h.adam_w_mode ? -h.lr * h.weight_decay : 0.0f;
  c.grad_factor = grad_factor;
  return c;
}

struct LambCoeffs {
  float beta1, beta2, one_minus_beta1, one_minus_beta2;
  float step_size;  // lr * sqrt(bias_correction2) / bias_correction1 (bias correction folded in)
  float weight_decay, max_coeff, min_coeff;
  float eps_inside, eps_outside;  // denom = sqrt(v + eps_inside) + eps_outside; one of them is 0
  float grad_factor;
};

inline LambCoeffs lamb_coeffs(const LambHyper& h, int64_t step, float grad_factor) {
  const double bc1 = bias_correction(h.bias_correction, h.beta1, step);
  const double bc2 = bias_correction(h.bias_correction, h.beta2, step);
  LambCoeffs c;
  set_betas(c, h);
  c.step_size = static_cast<float>(double(h.lr) * std::sqrt(bc2) / bc1);
  c.weight_decay = h.weight_decay;
  c.max_coeff = h.max_coeff;
  c.min_coeff = h.min_coeff;
  c.eps_inside = h.eps_inside_sqrt ? h.eps : 0.0f;
  c.eps_outside = h.eps_inside_sqrt ? 0.0f : h.eps;
  c.grad_factor = grad_factor;
  return c;
}

// ---- element formulas ----

DSX_HD float element_sqrt(float x) { return sqrtf(x); }

// How Adam applies weight decay; a template argument, since the CPU loops vectorise only
// without run-time flags. adam_decay() picks it as DeepSpeed branches: no decay when it is 0.
enum class AdamDecay { None, L2, Decoupled };

inline AdamDecay adam_decay(const AdamHyper& h) {
  if (h.weight_decay == 0.0f) return AdamDecay::None;
  return h.adam_w_mode ? AdamDecay::Decoupled : AdamDecay::L2;
}

// Adam / AdamW, DeepSpeed CPU order: m, v from the (L2-decayed) gradient, then decoupled decay,
// then p += step_size * m / (sqrt(v) / sqrt(bc2) + eps).
template <AdamDecay kDecay>
DSX_HD void adam_element(const AdamCoeffs& c, float& p, float g, float& m, float& v) {
  g = g * c.grad_factor;
  if constexpr (kDecay == AdamDecay::L2) g = p * c.l2_decay + g;
  m = m * c.beta1 + g * c.one_minus_beta1;
  v = v * c.beta2 + (g * g) * c.one_minus_beta2;
  float denom = element_sqrt(v) * c.inv_sqrt_bc2 + c.eps;
  if constexpr (kDecay == AdamDecay::Decoupled) p = p + c.neg_lr_decay * p;
  p = p + c.step_size * (m / denom);
}

// LAMB's update direction u = m / denom + weight_decay * p, from moments already updated.
DSX_HD float lamb_direction(const LambCoeffs& c, float p, float m, float v) {
  float denom = element_sqrt(v + c.eps_inside) + c.eps_outside;
  return m / denom + c.weight_decay * p;
}

// LAMB phase 1: update the moments; the caller sums p^2 and u^2 per tensor.
DSX_HD float lamb_moments_element(const LambCoeffs& c, float p, float g, float& m, float& v) {
  g = g * c.grad_factor;
  m = m * c.beta1 + g * c.one_minus_beta1;
  v = v * c.beta2 + (g * g) * c.one_minus_beta2;
  return lamb_direction(c, p, m, v);
}

// LAMB's trust ratio ||p|| / ||u|| of one tensor, clamped as DeepSpeed does: only when both norms
// are non-zero; 1 otherwise (also when a norm is NaN, since NaN != 0 is true the clamp then
// yields NaN; DeepSpeed behaves the same).
DSX_HD float lamb_trust_ratio(const LambCoeffs& c, double p_sq, double u_sq) {
  float w = static_cast<float>(sqrt(p_sq));
  float u = static_cast<float>(sqrt(u_sq));
  if (w == 0.0f || u == 0.0f) return 1.0f;
  float r = w / u;
  if (r > c.max_coeff) r = c.max_coeff;
  if (r < c.min_coeff) r = c.min_coeff;
  return r;
}

// LAMB phase 2: p -= step_size * trust * u, u recomputed from the stored moments.
DSX_HD void lamb_apply_element(const LambCoeffs& c, float trust, float& p, float m, float v) {
  float u = lamb_direction(c, p, m, v);
  p = p - (c.step_size * trust) * u;
}

// Lion: c = beta1 m + (1 - beta1) g; p = p (1 - lr wd) - lr sign(c) with sign(0) taken as -1
// (DeepSpeed moves by +lr when c <= 0); m = beta2 m + (1 - beta2) g.
DSX_HD void lion_element(const LionHyper& h, float& p, float g, float& m, float grad_factor) {
  g = g * grad_factor;
  float c = m * h.beta1 + g * (1.0f - h.beta1);
  float step = c > 0.0f ? -h.lr : h.lr;
  p = p * (1.0f - h.lr * h.weight_decay) + step;
  m = m * h.beta2 + g * (1.0f - h.beta2);
}

// SGD as torch: d = g + wd p; buf = first ? d : momentum buf + (1 - dampening) d;
// d = nesterov ? d + momentum buf : buf; p -= lr d. The mode is a template argument (the loops
// vectorise only without run-time flags); kind picks it: no momentum, first step, later steps.
enum class SgdKind { Plain, MomentumFirst, Momentum };

template <SgdKind kKind, bool kNesterov>
DSX_HD void sgd_element(const SgdHyper& h, float& p, float g, float& buf, float grad_factor) {
  float d = g * grad_factor;
  d = d + h.weight_decay * p;
  if constexpr (kKind != SgdKind::Plain) {
    float b = kKind == SgdKind::MomentumFirst ? d : buf * h.momentum + (1.0f - h.dampening) * d;
    buf = b;
    d = kNesterov ? d + h.momentum * b : b;
  }
  p = p - h.lr * d;
}

// Adagrad as torch: d = g + wd p; sum += d^2; p -= lr d / (sqrt(sum) + eps).
DSX_HD void adagrad_element(const AdagradHyper& h, float& p, float g, float& sum,
                            float grad_factor) {
  float d = g * grad_factor + h.weight_decay * p;
  sum = sum + d * d;
  p = p - h.lr * (d / (element_sqrt(sum) + h.eps));
}

}  // namespace dsx::kernels
