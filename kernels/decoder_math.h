// Element formulas of the decoder layers GPT-2 and the Llama family share (LayerNorm and GELU are
// GPT-2's alone), used by the CPU loops (kernels/cpu/decoder_layers.cpp) and the CUDA kernels
// (kernels/cuda/decoder_*.cu) so the CPU tests check the arithmetic the GPU runs.
// Templated on the scalar so the float64 gradient checks run the same formulas.
//
// The reductions (row sums, maxima, dot products) stay in the kernels, which order them for their
// hardware (SIMD lanes, warps). Formulas that need an exp or tanh take it precomputed (*_given),
// so the CPU's vector loops supply their own (kernels/cpu/vector_math.h) and the GPU its expf.
#pragma once

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "kernels/dtype.h"

namespace dsx::kernels::decoder {

using std::log;   // float and double overloads, host and device
using std::sqrt;
using std::tanh;

inline constexpr double kLayerNormEps = 1e-5;  // GPT-2's LayerNorm epsilon
inline constexpr double kGeluScale = 0.7978845608028654;  // sqrt(2 / pi)
inline constexpr double kGeluCubic = 0.044715;

// 1 / sqrt(x). The GPU takes its reciprocal square root instruction (rsqrtf, within 2 ulp), the
// CPU an IEEE division by an IEEE square root.
template <class T>
DSX_HD T inv_sqrt(T x) {
#if defined(__CUDA_ARCH__)
  if constexpr (std::is_same_v<T, float>)
    return rsqrtf(x);
  else
    return rsqrt(x);
#else
  return T(1) / sqrt(x);
#endif
}

// ---- LayerNorm ----

// The row's mean, from the sum of its C inputs.
template <class T>
DSX_HD T layernorm_mean(T sum, int C) {
  return sum / T(C);
}

// rstd = 1 / sqrt(variance + eps), from the sum over the row of (x - mean)^2 (the biased
// variance, as torch.nn.LayerNorm).
template <class T>
DSX_HD T layernorm_rstd(T sum_sq_dev, int C) {
  return inv_sqrt(sum_sq_dev / T(C) + T(kLayerNormEps));
}

// LayerNorm's normalised input, x_hat = (x - mean) * rstd: the forward's output before the
// affine, and the factor of the weight gradient (dweight += dout * x_hat, dbias += dout).
template <class T>
DSX_HD T layernorm_xhat(T x, T mean, T rstd) {
  return (x - mean) * rstd;
}

// The forward's output, x_hat * weight + bias.
template <class T>
DSX_HD T layernorm_affine(T xhat, T weight, T bias) {
  return xhat * weight + bias;
}

// The gradient at x_hat, dnorm = dout * weight.
template <class T>
DSX_HD T layernorm_dnorm(T dout, T weight) {
  return dout * weight;
}

// d loss / d x = rstd * (dnorm - mean(dnorm) - x_hat * mean(dnorm * x_hat)), given the two row
// means (the sums over the row, through layernorm_mean).
template <class T>
DSX_HD T layernorm_dinp_given(T dnorm, T xhat, T dnorm_mean, T dnorm_xhat_mean, T rstd) {
  return (dnorm - dnorm_mean - xhat * dnorm_xhat_mean) * rstd;
}

// ---- softmax and attention ----

// Softmax of a row: p = e / sum(e), e = exp(x - max(x)) (the max subtracted so no exp
// overflows). Given the row's sum of e, the factor every e is multiplied by.
template <class T>
DSX_HD T softmax_inv_sum(T sum_exp) {
  return T(1) / sum_exp;
}

// Softmax backward: d loss / d x = p * (dp - sum(p * dp)), given the row's sum(p * dp).
template <class T>
DSX_HD T softmax_backward_given(T p, T dp, T sum_p_dp) {
  return p * (dp - sum_p_dp);
}

// Attention's scores are q . k / sqrt(head size); query t meets keys 0..t only (causal: the
// masked keys get weight 0, and gradient 0).
template <class T>
DSX_HD T attention_scale(int head_size) {
  return inv_sqrt(T(head_size));
}

// ---- cross-entropy over logits z, target y (y < 0: the row is ignored) ----

// A target below 0 (padding) takes no part: loss 0, gradient 0, not counted in the mean.
DSX_HD bool crossentropy_counted(int32_t target) { return target >= 0; }

// log sum exp(z) = max + log(sum exp(z - max)), given the max and that sum.
template <class T>
DSX_HD T logsumexp_given(T max, T sum_exp) {
  return max + log(sum_exp);
}

// loss = -log p_y = logsumexp(z) - z_y; target_logit() reads z_y, only for a counted target.
template <class T, class F>
DSX_HD T crossentropy_loss(T lse, int32_t target, F&& target_logit) {
  return crossentropy_counted(target) ? lse - T(target_logit()) : T(0);
}

// d loss_scaled / d z_i = (p_i - [i == y]) * dloss with p_i = exp(z_i - lse), written as
// p_i * dloss - [i == y] * dloss: given p_dloss = exp(z_i - lse) * dloss, which the CPU's vector
// loop computes for the whole row before it corrects the target's entry.
template <class T>
DSX_HD T crossentropy_dlogit_given(T p_dloss, bool is_target, T dloss) {
  return is_target ? p_dloss - dloss : p_dloss;
}

// ---- GELU ----

// GELU, tanh form (GPT-2): 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3). Split into u,
// and the value and slope given th = tanh(u), so the CPU's vector loops can supply their own tanh.
template <class T>
DSX_HD T gelu_tanh_arg(T x) {
  return T(kGeluScale) * (x + T(kGeluCubic) * x * x * x);
}

template <class T>
DSX_HD T gelu_tanh_given(T x, T th) {
  return T(0.5) * x * (T(1) + th);
}

template <class T>
DSX_HD T gelu_tanh_grad_given(T x, T th) {
  T sech2 = T(1) - th * th;
  return T(0.5) * (T(1) + th) + T(0.5) * x * sech2 * T(kGeluScale) * (T(1) + T(3 * kGeluCubic) * x * x);
}

template <class T>
DSX_HD T gelu_tanh(T x) {
  return gelu_tanh_given(x, tanh(gelu_tanh_arg(x)));
}

// d gelu_tanh / dx.
template <class T>
DSX_HD T gelu_tanh_grad(T x) {
  return gelu_tanh_grad_given(x, tanh(gelu_tanh_arg(x)));
}

}  // namespace dsx::kernels::decoder
