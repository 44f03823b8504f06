// Element formulas of the GPT-2 layers, shared by the CPU loops (kernels/cpu/gpt2_layers.cpp) and
// the CUDA kernels (kernels/cuda/gpt2_*.cu) so the CPU tests check the arithmetic the GPU runs.
// Templated on the scalar so the float64 gradient checks run the same formulas.
#pragma once

#include <cmath>

#include "kernels/dtype.h"

namespace dsx::kernels::gpt2 {

using std::tanh;  // float and double overloads, host and device

inline constexpr double kLayerNormEps = 1e-5;  // GPT-2's LayerNorm epsilon
inline constexpr double kGeluScale = 0.7978845608028654;  // sqrt(2 / pi)
inline constexpr double kGeluCubic = 0.044715;

// LayerNorm's normalised input, x_hat = (x - mean) * rstd: the forward's output before the
// affine, and the factor of the weight gradient (dweight += dout * x_hat, dbias += dout).
template <class T>
DSX_HD T layernorm_xhat(T x, T mean, T rstd) {
  return (x - mean) * rstd;
}

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

}  // namespace dsx::kernels::gpt2
