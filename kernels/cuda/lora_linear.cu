// The LoRA branch on the GPU (see lora_linear.h): the four thin products of
// kernels/cpu/lora_linear.cpp each way, on DecoderBlas's cuBLASLt plans, and the dropout mask of
// kernels/lora_math.h as two element kernels.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/lora_linear.h"
#include "kernels/cuda/storage_types.cuh"

namespace dsx::kernels::cuda {

template <class T>
void lora_linear_forward(DecoderBlas& blas, T* out, T* u, const T* x, const T* A, const T* B,
                         size_t N, int C, int R, int OC, float scale, cudaStream_t stream) {
  decoder_gemm(blas, false, true, N, R, C, 1.0f, x, C, A, C, 0.0f, u, R, stream);
  decoder_gemm(blas, false, true, N, OC, R, scale, u, R, B, R, 1.0f, out, OC, stream);
}

template <class T>
void lora_linear_backward(DecoderBlas& blas, T* dx, T* dA, T* dB, T* du, const T* dout, const T* x,
                          const T* u, const T* A, const T* B, size_t N, int C, int R, int OC,
                          float scale, cudaStream_t stream, bool dx_accumulates) {
  const size_t rows = N;
  decoder_gemm(blas, false, false, rows, R, OC, scale, dout, OC, B, R, 0.0f, du, R, stream);
  decoder_gemm(blas, true, false, size_t(OC), R, static_cast<int>(N), scale, dout, OC, u, R, 1.0f,
               dB, R, stream);
  decoder_gemm(blas, true, false, size_t(R), C, static_cast<int>(N), 1.0f, du, R, x, C, 1.0f, dA, C,
               stream);
  decoder_gemm(blas, false, false, rows, C, R, 1.0f, du, R, A, C, dx_accumulates ? 1.0f : 0.0f, dx,
               C, stream);
}

namespace {

template <class T>
__global__ void dropout_forward_kernel(T* xdrop, const T* x, size_t n, lora::DropoutMask mask) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x)
    xdrop[i] = mask.kept(i) ? from_f<T>(to_f(x[i]) * mask.inv_keep) : from_f<T>(0.0f);
}

template <class T>
__global__ void dropout_backward_kernel(T* dinp, const T* dxdrop, size_t n,
                                        lora::DropoutMask mask) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x)
    if (mask.kept(i)) dinp[i] = from_f<T>(to_f(dinp[i]) + to_f(dxdrop[i]) * mask.inv_keep);
}

}  // namespace

template <class T>
void lora_dropout_forward(T* xdrop, const T* x, size_t n, lora::DropoutMask mask,
                          cudaStream_t stream) {
  DSX_TOUCHES(DSX_WRITES(xdrop, n * sizeof(T)), DSX_READS(x, n * sizeof(T)));
  DSX_LAUNCH(grid_for(n), kBlock, 0, stream, dropout_forward_kernel)(xdrop, x, n, mask);
  check_launch("lora_dropout_forward");
}

template <class T>
void lora_dropout_backward(T* dinp, const T* dxdrop, size_t n, lora::DropoutMask mask,
                           cudaStream_t stream) {
  DSX_TOUCHES(DSX_WRITES(dinp, n * sizeof(T)), DSX_READS(dxdrop, n * sizeof(T)));
  DSX_LAUNCH(grid_for(n), kBlock, 0, stream, dropout_backward_kernel)(dinp, dxdrop, n, mask);
  check_launch("lora_dropout_backward");
}

#define DSX_LORA_LINEAR_INSTANTIATE(T)                                                             \
  template void lora_linear_forward<T>(DecoderBlas&, T*, T*, const T*, const T*, const T*, size_t, \
                                       int, int, int, float, cudaStream_t);                        \
  template void lora_linear_backward<T>(DecoderBlas&, T*, T*, T*, T*, const T*, const T*,          \
                                        const T*, const T*, const T*, size_t, int, int, int,       \
                                        float, cudaStream_t, bool);                                \
  template void lora_dropout_forward<T>(T*, const T*, size_t, lora::DropoutMask, cudaStream_t);    \
  template void lora_dropout_backward<T>(T*, const T*, size_t, lora::DropoutMask, cudaStream_t);

DSX_LORA_LINEAR_INSTANTIATE(float)
DSX_LORA_LINEAR_INSTANTIATE(__nv_bfloat16)
DSX_LORA_LINEAR_INSTANTIATE(__half)

}  // namespace dsx::kernels::cuda
