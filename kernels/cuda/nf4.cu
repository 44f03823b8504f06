// NF4 kernels (kernels/cuda/nf4.h). The matmul kernels give one output element per thread and
// walk the reduction in order, dequantising each weight from its nibble and its block's absmax:
// plain and memory-bound, the GPU twin of the CPU's tiled path rather than a tuned GEMM.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/nf4.h"
#include "kernels/cuda/storage_types.cuh"
#include "kernels/nf4_math.h"

namespace dsx::kernels::cuda {
namespace {

__device__ __forceinline__ float weight_at(const Nf4DeviceWeight& w, int64_t i) {
  return round_to_dtype(w.compute, nf4_dequantize_element(w.packed, i, w.absmax[i / w.blocksize]));
}

__global__ void resolve_absmax_kernel(float* absmax, const uint8_t* q, const float* nested_absmax,
                                      const float* code, float offset, int nested_blocksize,
                                      int64_t blocks) {
  int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t b = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; b < blocks; b += stride)
    absmax[b] = nf4_nested_absmax_element(q, nested_absmax, code, offset, nested_blocksize, b);
}

__global__ void dequantize_rows_kernel(float* out, Nf4DeviceWeight w, int64_t begin, int64_t n) {
  int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    out[i] = weight_at(w, begin + i);
}

// grid (row blocks, tokens): thread o of token t sums x[t, i] W[o, i] over i, then adds the
// bias (after the sum, as the CPU layer does).
template <class T>
__global__ void forward_kernel(T* y, const T* x, Nf4DeviceWeight w, const T* bias) {
  int64_t o = int64_t(blockIdx.x) * blockDim.x + threadIdx.x, t = blockIdx.y;
  if (o >= w.rows) return;
  const T* xt = x + t * w.cols;
  float acc = 0.0f;
  for (int64_t i = 0; i < w.cols; ++i) acc += to_f(xt[i]) * weight_at(w, o * w.cols + i);
  if (bias) acc += to_f(bias[o]);
  y[t * w.rows + o] = from_f<T>(acc);
}

// grid (column blocks, tokens): thread i of token t sums dy[t, o] W[o, i] over o; neighbouring
// threads read neighbouring weights.
template <class T>
__global__ void backward_input_kernel(T* dx, const T* dy, Nf4DeviceWeight w, bool accumulate) {
  int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x, t = blockIdx.y;
  if (i >= w.cols) return;
  const T* dyt = dy + t * w.rows;
  float acc = 0.0f;
  for (int64_t o = 0; o < w.rows; ++o) acc += to_f(dyt[o]) * weight_at(w, o * w.cols + i);
  T* out = dx + t * w.cols + i;
  *out = from_f<T>(accumulate ? to_f(*out) + acc : acc);
}

unsigned blocks_of(int64_t n) { return static_cast<unsigned>((n + kBlock - 1) / kBlock); }

size_t weight_bytes(const Nf4DeviceWeight& w) { return size_t((w.rows * w.cols + 1) / 2); }
size_t absmax_bytes(const Nf4DeviceWeight& w) {
  return size_t((w.rows * w.cols + w.blocksize - 1) / w.blocksize) * sizeof(float);
}

}  // namespace

void nf4_resolve_absmax(float* absmax, const uint8_t* q, const float* nested_absmax,
                        const float* code, float offset, int nested_blocksize, int64_t blocks,
                        cudaStream_t stream) {
  if (blocks == 0) return;
  const size_t nested = size_t((blocks + nested_blocksize - 1) / nested_blocksize);
  DSX_TOUCHES(DSX_WRITES(absmax, size_t(blocks) * 4), DSX_READS(q, size_t(blocks)),
              DSX_READS(nested_absmax, nested * 4), DSX_READS(code, 256 * 4));
  DSX_LAUNCH(grid_for(size_t(blocks)), kBlock, 0, stream, resolve_absmax_kernel)
  (absmax, q, nested_absmax, code, offset, nested_blocksize, blocks);
  check_launch("nf4_resolve_absmax");
}

void nf4_dequantize_rows(float* out, const Nf4DeviceWeight& w, int64_t row0, int64_t nrows,
                         cudaStream_t stream) {
  const int64_t n = nrows * w.cols;
  if (n == 0) return;
  DSX_TOUCHES(DSX_WRITES(out, size_t(n) * 4), DSX_READS(w.packed, weight_bytes(w)),
              DSX_READS(w.absmax, absmax_bytes(w)));
  DSX_LAUNCH(grid_for(size_t(n)), kBlock, 0, stream, dequantize_rows_kernel)
  (out, w, row0 * w.cols, n);
  check_launch("nf4_dequantize_rows");
}

template <class T>
void nf4_linear_forward(T* y, const T* x, const Nf4DeviceWeight& w, int64_t tokens,
                        cudaStream_t stream, const T* bias) {
  if (tokens == 0 || w.rows == 0) return;
  const size_t e = sizeof(T);
  DSX_TOUCHES(DSX_WRITES(y, size_t(tokens * w.rows) * e), DSX_READS(x, size_t(tokens * w.cols) * e),
              DSX_READS(w.packed, weight_bytes(w)), DSX_READS(w.absmax, absmax_bytes(w)),
              DSX_READS(bias, bias ? size_t(w.rows) * e : 0));
  DSX_LAUNCH(dim3(blocks_of(w.rows), unsigned(tokens)), kBlock, 0, stream, forward_kernel<T>)
  (y, x, w, bias);
  check_launch("nf4_linear_forward");
}

template <class T>
void nf4_linear_backward_input(T* dx, const T* dy, const Nf4DeviceWeight& w, int64_t tokens,
                               bool accumulate, cudaStream_t stream) {
  if (tokens == 0 || w.cols == 0) return;
  const size_t e = sizeof(T);
  DSX_TOUCHES(DSX_WRITES(dx, size_t(tokens * w.cols) * e),
              DSX_READS(dy, size_t(tokens * w.rows) * e), DSX_READS(w.packed, weight_bytes(w)),
              DSX_READS(w.absmax, absmax_bytes(w)));
  DSX_LAUNCH(dim3(blocks_of(w.cols), unsigned(tokens)), kBlock, 0, stream, backward_input_kernel<T>)
  (dx, dy, w, accumulate);
  check_launch("nf4_linear_backward_input");
}

#define DSX_NF4_INSTANTIATE(T)                                                                     \
  template void nf4_linear_forward<T>(T*, const T*, const Nf4DeviceWeight&, int64_t, cudaStream_t, \
                                      const T*);                                                   \
  template void nf4_linear_backward_input<T>(T*, const T*, const Nf4DeviceWeight&, int64_t, bool,  \
                                             cudaStream_t);

DSX_NF4_INSTANTIATE(float)
DSX_NF4_INSTANTIATE(__nv_bfloat16)
DSX_NF4_INSTANTIATE(__half)

}  // namespace dsx::kernels::cuda
