// Element formulas of the Llama-family layers (RMSNorm, rotary embedding, SwiGLU), written once for
// the CPU loops (kernels/cpu/llama_layers.cpp) and, later, the CUDA kernels, so the CPU tests
// check the arithmetic the GPU will run. Templated on the scalar so the float64 gradient checks run
// the same formulas. Softmax, attention's scale and cross-entropy are shared (kernels/decoder_math.h).
//
// As in decoder_math.h the reductions (a row's sum of squares, the dot products of backward) stay in
// the kernels, and a formula that needs an exp takes it precomputed (*_given).
#pragma once

#include <cmath>

#include "kernels/dtype.h"
#include "kernels/decoder_math.h"

namespace dsx::kernels::llama {

using std::exp;

// ---- RMSNorm: y = x * r * w, r = 1 / sqrt(mean(x^2) + eps) (no mean subtracted, no bias) ----
// Transformers normalises in fp32 for a float model; the CPU loops sum the squares in T.

// r from the row's sum of x^2 over its C channels.
template <class T>
DSX_HD T rmsnorm_rstd(T sum_sq, int C, T eps) {
  return decoder::inv_sqrt(sum_sq / T(C) + eps);
}

// The normalised input x_hat = x * r: the forward's output before the weight and the factor of the
// weight's gradient (dw += dout * x_hat).
template <class T>
DSX_HD T rmsnorm_xhat(T x, T rstd) {
  return x * rstd;
}

template <class T>
DSX_HD T rmsnorm_out(T xhat, T weight) {
  return xhat * weight;
}

// The gradient at x_hat, dnorm = dout * w.
template <class T>
DSX_HD T rmsnorm_dnorm(T dout, T weight) {
  return dout * weight;
}

// d loss / d x = r * (dnorm - x_hat * mean(dnorm * x_hat)): r depends on x, hence the second term.
template <class T>
DSX_HD T rmsnorm_dinp_given(T dnorm, T xhat, T dnorm_xhat_mean, T rstd) {
  return (dnorm - xhat * dnorm_xhat_mean) * rstd;
}

// ---- rotary embedding, Hugging Face's rotate_half layout ----
// A head vector of D channels pairs channel j with j + D/2 (both at frequency j); the pair turns by
// angle pos * inv_freq[j]. cos and sin hold D/2 entries, one per frequency.

// Forward of one pair: (a, b) -> (a cos - b sin, b cos + a sin), i.e. x*cos + rotate_half(x)*sin.
template <class T>
DSX_HD void rope_pair_forward(T& out_a, T& out_b, T a, T b, T cos, T sin) {
  out_a = a * cos - b * sin;
  out_b = b * cos + a * sin;
}

// Backward of one pair: the rotation is orthogonal, so the gradient turns back by -angle.
template <class T>
DSX_HD void rope_pair_backward(T& din_a, T& din_b, T dout_a, T dout_b, T cos, T sin) {
  din_a = dout_a * cos + dout_b * sin;
  din_b = dout_b * cos - dout_a * sin;
}

// One head vector of D channels; out may alias x.
template <class T>
DSX_HD void rope_forward(T* out, const T* x, const T* cos, const T* sin, int D) {
  const int half = D / 2;
  for (int j = 0; j < half; ++j) {
    const T a = x[j], b = x[j + half];
    rope_pair_forward(out[j], out[j + half], a, b, cos[j], sin[j]);
  }
}

// d loss / d x of one head vector from d loss / d out; din may alias dout.
template <class T>
DSX_HD void rope_backward(T* din, const T* dout, const T* cos, const T* sin, int D) {
  const int half = D / 2;
  for (int j = 0; j < half; ++j) {
    const T a = dout[j], b = dout[j + half];
    rope_pair_backward(din[j], din[j + half], a, b, cos[j], sin[j]);
  }
}

// ---- SwiGLU: h = silu(gate) * up, silu(g) = g * sigmoid(g) ----

// sigmoid(g) = 1 / (1 + exp(-g)), given exp_neg = exp(-g) (inf for very negative g gives 0).
template <class T>
DSX_HD T sigmoid_given(T exp_neg) {
  return T(1) / (T(1) + exp_neg);
}

template <class T>
DSX_HD T sigmoid(T g) {
  return sigmoid_given(exp(-g));
}

template <class T>
DSX_HD T swiglu_given(T gate, T up, T sig) {
  return gate * sig * up;
}

template <class T>
DSX_HD T swiglu(T gate, T up) {
  return swiglu_given(gate, up, sigmoid(gate));
}

// d h / d gate = up * silu'(gate), silu'(g) = s (1 + g (1 - s)), s = sigmoid(g).
template <class T>
DSX_HD T swiglu_dgate_given(T dout, T gate, T up, T sig) {
  return dout * up * sig * (T(1) + gate * (T(1) - sig));
}

// d h / d up = silu(gate).
template <class T>
DSX_HD T swiglu_dup_given(T dout, T gate, T sig) {
  return dout * gate * sig;
}

}  // namespace dsx::kernels::llama
