// The LoRA branch beside a frozen linear layer on the GPU: the CUDA twin of
// kernels/cpu/lora_linear.h, same names, argument order and products, plus the cuBLASLt plans
// (DecoderBlas) and a stream. T is the storage type (float, __nv_bfloat16 or __half); products
// compute in fp32. Pointers are device memory.
//   out += scale * (x @ A^T) @ B^T        x (N, C), A (R, C), B (OC, R), out (N, OC)
// Dropout is the caller's, with the mask of kernels/lora_math.h (the kernels below apply it).
// C++17: included by .cu files.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

#include "kernels/cuda/decoder_layers.h"
#include "kernels/lora_math.h"

namespace dsx::kernels::cuda {

// u (N, R) = x @ A^T is kept for backward; out (N, OC) += scale * u @ B^T.
template <class T>
void lora_linear_forward(DecoderBlas& blas, T* out, T* u, const T* x, const T* A, const T* B,
                         size_t N, int C, int R, int OC, float scale, cudaStream_t stream);

// du (N, R) = scale * dout @ B (scratch); dB += scale * dout^T @ u; dA += du^T @ x;
// dx += du @ A, or dx = du @ A when !dx_accumulates (a scratch the caller masks afterwards).
template <class T>
void lora_linear_backward(DecoderBlas& blas, T* dx, T* dA, T* dB, T* du, const T* dout, const T* x,
                          const T* u, const T* A, const T* B, size_t N, int C, int R, int OC,
                          float scale, cudaStream_t stream, bool dx_accumulates = true);

// xdrop (n) = x where mask keeps, scaled by 1/keep; 0 elsewhere.
template <class T>
void lora_dropout_forward(T* xdrop, const T* x, size_t n, lora::DropoutMask mask,
                          cudaStream_t stream);
// dinp (n) += dxdrop / keep where mask keeps.
template <class T>
void lora_dropout_backward(T* dinp, const T* dxdrop, size_t n, lora::DropoutMask mask,
                           cudaStream_t stream);

}  // namespace dsx::kernels::cuda
