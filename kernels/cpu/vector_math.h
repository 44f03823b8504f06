// exp and tanh that vectorise, and the row loops of softmax-like layers (max, sum of exp,
// exp-and-scale) compiled for each SIMD level (internal to kernels/cpu/, see loops.h).
// libm's expf and tanhf are scalar calls; GPT-2's cross-entropy alone takes two exps per logit
// (100 million per step at batch 4 x 256 with GPT-2's vocabulary). The float versions here are a
// Cody-Waite range reduction and a degree-6 polynomial (Cephes' expf coefficients), within 2 ulp
// of expf over the clamped range; double keeps std::exp, so the float64 gradient checks stay
// exact references.
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "kernels/cpu/loops.h"

namespace dsx::kernels::cpu {

// e^x for float, clamped to [-87, 88] (so 2^n stays a normal float): exp(-1000) gives 1.6e-38,
// not 0, which no sum of exponentials here can tell apart.
DSX_ALWAYS_INLINE inline float exp_approx(float x) {
  x = std::min(std::max(x, -87.0f), 88.0f);
  // n = round(x / ln 2) by the 1.5 * 2^23 trick: adding it leaves the rounded integer in the low
  // mantissa bits.
  constexpr float kShift = 12582912.0f;
  float shifted = x * 1.44269504088896341f + kShift;
  float n = shifted - kShift;
  int32_t n_int = std::bit_cast<int32_t>(shifted) - std::bit_cast<int32_t>(kShift);
  float r = x - n * 0.693359375f - n * -2.12194440e-4f;  // ln 2 in two parts: r exact
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3333818289e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  float y = p * r * r + r + 1.0f;
  return y * std::bit_cast<float>((n_int + 127) << 23);
}

template <class T>
DSX_ALWAYS_INLINE inline T vexp(T x) {
  if constexpr (std::is_same_v<T, float>)
    return exp_approx(x);
  else
    return std::exp(x);
}

// tanh(u) = 1 - 2 / (e^(2u) + 1): absolute error about 1e-7 (relative error grows for tiny |u|,
// where GELU's 1 + tanh and 1 - tanh^2 do not see it).
template <class T>
DSX_ALWAYS_INLINE inline T vtanh(T u) {
  if constexpr (std::is_same_v<T, float>)
    return 1.0f - 2.0f / (exp_approx(2.0f * u) + 1.0f);
  else
    return std::tanh(u);
}

// ---- one row, one SIMD level: max, sum of exp(x - shift), out = exp(x - shift) * scale ----
// (GCC 12 vectorises the max reduction written as a comparison, not as std::max.)

#define DSX_ROW_OPS(SUFFIX, TARGET)                                                                \
  template <class T>                                                                               \
  TARGET T row_max_##SUFFIX(const T* x, size_t n) {                                                \
    T m = x[0];                                                                                    \
    _Pragma("omp simd reduction(max : m)") for (size_t i = 1; i < n; ++i) m = x[i] > m ? x[i] : m; \
    return m;                                                                                      \
  }                                                                                                \
  template <class T>                                                                               \
  TARGET T row_sum_exp_##SUFFIX(const T* x, size_t n, T shift) {                                   \
    T s = 0;                                                                                       \
    _Pragma("omp simd reduction(+ : s)") for (size_t i = 0; i < n; ++i) s += vexp(x[i] - shift);   \
    return s;                                                                                      \
  }                                                                                                \
  template <class T>                                                                               \
  TARGET T row_exp_in_place_##SUFFIX(T* x, size_t n, T shift) {                                    \
    T s = 0;                                                                                       \
    _Pragma("omp simd reduction(+ : s)") for (size_t i = 0; i < n; ++i) {                          \
      x[i] = vexp(x[i] - shift);                                                                   \
      s += x[i];                                                                                   \
    }                                                                                              \
    return s;                                                                                      \
  }                                                                                                \
  template <class T>                                                                               \
  TARGET void row_exp_scale_##SUFFIX(T* out, const T* x, size_t n, T shift, T scale) {             \
    _Pragma("omp simd") for (size_t i = 0; i < n; ++i) out[i] = vexp(x[i] - shift) * scale;        \
  }

DSX_ROW_OPS(avx512, DSX_TARGET_AVX512)
DSX_ROW_OPS(avx2, DSX_TARGET_AVX2)
DSX_ROW_OPS(scalar, DSX_TARGET_SCALAR)
#undef DSX_ROW_OPS

#define DSX_ROW_DISPATCH(NAME, ...)      \
  switch (simd_level()) {                \
    case SimdLevel::Avx512:              \
      return NAME##_avx512(__VA_ARGS__); \
    case SimdLevel::Avx2:                \
      return NAME##_avx2(__VA_ARGS__);   \
    default:                             \
      return NAME##_scalar(__VA_ARGS__); \
  }

// max of x[0, n), n >= 1
template <class T>
T row_max(const T* x, size_t n) {
  DSX_ROW_DISPATCH(row_max, x, n)
}
// sum of exp(x[i] - shift)
template <class T>
T row_sum_exp(const T* x, size_t n, T shift) {
  DSX_ROW_DISPATCH(row_sum_exp, x, n, shift)
}
// x[i] = exp(x[i] - shift); returns their sum
template <class T>
T row_exp_in_place(T* x, size_t n, T shift) {
  DSX_ROW_DISPATCH(row_exp_in_place, x, n, shift)
}
// x[i] = exp(x[i] - shift) * scale
template <class T>
void row_exp_scale(T* x, size_t n, T shift, T scale) {
  DSX_ROW_DISPATCH(row_exp_scale, x, x, n, shift, scale)
}
// out[i] = exp(x[i] - shift) * scale: the same values, written elsewhere
template <class T>
void row_exp_scale_into(T* out, const T* x, size_t n, T shift, T scale) {
  DSX_ROW_DISPATCH(row_exp_scale, out, x, n, shift, scale)
}
#undef DSX_ROW_DISPATCH

}  // namespace dsx::kernels::cpu
