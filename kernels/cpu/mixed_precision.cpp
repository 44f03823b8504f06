// CPU mixed-precision helpers (kernels/mixed_precision.h), SIMD + OpenMP.
#include "kernels/mixed_precision.h"

#include <cfloat>
#include <cmath>

#include "kernels/cpu/loops.h"

namespace dsx::kernels {
namespace {

// 1.0 when v is Inf or NaN, else 0.0: summed, it counts the bad elements without a branch.
DSX_HD double non_finite(float v) { return std::fabs(v) <= FLT_MAX ? 0.0 : 1.0; }

}  // namespace

bool unscale_and_check(DType dtype, void* x, float factor, size_t count) {
  return dispatch_dtype(dtype, [&](auto tag) {
    constexpr DType T = decltype(tag)::value;
    return cpu::sum_elements(count, [=](size_t i) DSX_ALWAYS_INLINE {
             float v = load_element<T>(x, i) * factor;
             store_element<T>(x, i, v);
             return non_finite(load_element<T>(x, i));
           }) > 0.0;
  });
}

bool has_inf_or_nan(DType dtype, const void* x, size_t count) {
  return dispatch_dtype(dtype, [&](auto tag) {
    constexpr DType T = decltype(tag)::value;
    return cpu::sum_elements(count, [=](size_t i) DSX_ALWAYS_INLINE {
             return non_finite(load_element<T>(x, i));
           }) > 0.0;
  });
}

double sum_of_squares(DType dtype, const void* x, size_t count) {
  return dispatch_dtype(dtype, [&](auto tag) {
    constexpr DType T = decltype(tag)::value;
    return cpu::sum_elements(count, [=](size_t i) DSX_ALWAYS_INLINE {
      double v = load_element<T>(x, i);
      return v * v;
    });
  });
}

void cast(DType src_dtype, const void* src, DType dst_dtype, void* dst, size_t count) {
  dispatch_dtype(src_dtype, [&](auto src_tag) {
    dispatch_dtype(dst_dtype, [&](auto dst_tag) {
      constexpr DType S = decltype(src_tag)::value;
      constexpr DType D = decltype(dst_tag)::value;
      cpu::for_each_element(count, [=](size_t i) DSX_ALWAYS_INLINE {
        store_element<D>(dst, i, load_element<S>(src, i));
      });
    });
  });
}

}  // namespace dsx::kernels
