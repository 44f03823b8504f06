// Mixed-precision helpers on the CPU over flat fp32/fp16/bf16 buffers: unscale-and-check for the
// fp16 overflow test, the sum of squares for the global gradient norm, and casts. (scale and the
// element-wise reductions of the comm layer are in kernels/reduce.h.) SIMD + OpenMP like the
// optimizers; any length and alignment. CUDA twins: kernels/cuda/mixed_precision.h.
#pragma once

#include <cstddef>

#include "kernels/dtype.h"

namespace dsx::kernels {

// x[i] *= factor (factor = 1 / loss_scale, possibly folded with the clip coefficient), and
// returns true when any result is Inf or NaN, in the same pass. The buffer is scaled either way;
// the caller skips the step (and discards the gradients) when it returns true.
bool unscale_and_check(DType dtype, void* x, float factor, size_t count);

// True when any element is Inf or NaN (no write).
bool has_inf_or_nan(DType dtype, const void* x, size_t count);

// sum(x[i]^2) accumulated in float64, one partial sum per SIMD lane and thread, added in a fixed
// order (same bits for the same thread count and SIMD level). Relative error at most
// k * 2^-53 for k terms per partial sum (1e9 elements, 16 lanes, 1 thread: <= 7e-9), typically
// 2^-53 * sqrt(k) (~1e-12). Inf or NaN in x gives Inf or NaN.
double sum_of_squares(DType dtype, const void* x, size_t count);

// dst[i] = src[i] converted (round to nearest even; NaN stays NaN). src and dst must not overlap
// unless they are the same buffer with the same dtype.
void cast(DType src_dtype, const void* src, DType dst_dtype, void* dst, size_t count);

}  // namespace dsx::kernels
