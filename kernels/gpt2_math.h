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

// GELU, tanh form (GPT-2): 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
template <class T>
DSX_HD T gelu_tanh(T x) {
  T u = T(kGeluScale) * (x + T(kGeluCubic) * x * x * x);
  return T(0.5) * x * (T(1) + tanh(u));
}

// d gelu_tanh / dx.
template <class T>
DSX_HD T gelu_tanh_grad(T x) {
  T u = T(kGeluScale) * (x + T(kGeluCubic) * x * x * x);
  T th = tanh(u);
  T sech2 = T(1) - th * th;
  return T(0.5) * (T(1) + th) + T(0.5) * x * sech2 * T(kGeluScale) * (T(1) + T(3 * kGeluCubic) * x * x);
}

}  // namespace dsx::kernels::gpt2
