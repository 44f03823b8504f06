// Mixed-precision helpers and reductions on the GPU: the CUDA twins of kernels/mixed_precision.h
// and kernels/reduce.h, same names and element formulas, on a caller-given stream. Pointers are
// device memory; results land in device memory so nothing synchronises.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

#include "kernels/clip_math.h"
#include "kernels/dtype.h"
#include "kernels/reduce.h"

namespace dsx::kernels::cuda {

// x[i] *= factor; sets *found_inf (device int) to 1 when any result is Inf or NaN. Never clears
// it, so one flag can collect several buffers: zero it once per step.
void unscale_and_check(DType dtype, void* x, float factor, size_t count, int* found_inf,
                       cudaStream_t stream);

// Sets *found_inf to 1 when any element is Inf or NaN (no write to x).
void has_inf_or_nan(DType dtype, const void* x, size_t count, int* found_inf, cudaStream_t stream);

// *out (device double) = sum(x[i]^2), accumulated in float64 per thread, per block, then over
// a fixed number of blocks in a fixed order: the same bits on every run and every GPU.
// workspace: sum_of_squares_workspace_bytes() of device scratch.
size_t sum_of_squares_workspace_bytes();
void sum_of_squares(DType dtype, const void* x, size_t count, double* out, void* workspace,
                    cudaStream_t stream);

// dst[i] = src[i] rounded to fp32 (device memory both).
void narrow_to_float(const double* src, float* dst, size_t count, cudaStream_t stream);

// *factor (device float) = kernels/clip_math.h's zero_grad_factor of the global sum of squares
// at `sum_sq`: one thread, after the norm's allreduce, so the optimizer kernels read the unscale
// and clip factor from device memory and the host never computes it for them.
void zero_grad_factor(DeviceSumOfSquares sum_sq, double loss_scale, double max_norm, float* factor,
                      cudaStream_t stream);

void cast(DType src_dtype, const void* src, DType dst_dtype, void* dst, size_t count,
          cudaStream_t stream);

void scale(DType dtype, void* x, float factor, size_t count, cudaStream_t stream);

// dst = dst op src (Avg sums; the caller scales), as kernels/reduce.h.
void reduce_into(DType dtype, ReduceOp op, void* dst, const void* src, size_t count,
                 cudaStream_t stream);

// dst[i] = factor * the sum of element i over `blocks` blocks of src (block b at element
// b * stride), added to dst[i] when `accumulate`: kernels/reduce.h's sum_blocks.
void sum_blocks(DType src_dtype, const void* src, size_t blocks, size_t stride, float factor, DType dst_dtype,
                void* dst, size_t count, bool accumulate, cudaStream_t stream);

}  // namespace dsx::kernels::cuda
