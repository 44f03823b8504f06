// NF4 on the GPU: the CUDA twin of kernels/nf4_tensor.h's linear layer, same element math
// (kernels/nf4_math.h), on device memory and a caller-given stream. Each thread dequantises the
// weights it multiplies as it reads them, so no dequantised tile exists in memory at all; the
// double-quantised absmax is resolved once (one float per 64 weights).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/dtype.h"

namespace dsx::kernels::cuda {

struct Nf4DeviceWeight {
  int64_t rows = 0, cols = 0;  // [out_features, in_features]
  int blocksize = 64;
  DType compute = DType::BF16;
  const uint8_t* packed = nullptr;  // device, (rows * cols + 1) / 2 bytes
  const float* absmax = nullptr;    // device, one per block, double quantisation resolved
};

// absmax[b] = code[q[b]] * nested_absmax[b / nested_blocksize] + offset for b < blocks.
void nf4_resolve_absmax(float* absmax, const uint8_t* q, const float* nested_absmax,
                        const float* code, float offset, int nested_blocksize, int64_t blocks,
                        cudaStream_t stream);

// out (nrows * cols fp32) = rows [row0, row0 + nrows) of W, rounded to the compute dtype.
void nf4_dequantize_rows(float* out, const Nf4DeviceWeight& w, int64_t row0, int64_t nrows,
                         cudaStream_t stream);

// The matmuls take activations in a storage type T (float, __nv_bfloat16 or __half: the CUDA
// Llama's), multiply in fp32 and round each output to T once, as the cuBLASLt plans do.

// y[tokens, rows] = x[tokens, cols] W^T (+ bias[rows], when given).
template <class T>
void nf4_linear_forward(T* y, const T* x, const Nf4DeviceWeight& w, int64_t tokens,
                        cudaStream_t stream, const T* bias = nullptr);

// dx[tokens, cols] (+)= dy[tokens, rows] W.
template <class T>
void nf4_linear_backward_input(T* dx, const T* dy, const Nf4DeviceWeight& w, int64_t tokens,
                               bool accumulate, cudaStream_t stream);

}  // namespace dsx::kernels::cuda
