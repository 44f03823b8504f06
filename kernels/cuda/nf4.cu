// NF4 kernels (kernels/cuda/nf4.h). The matmul kernels give one output element per thread and
// walk the reduction in order, dequantising each weight from its nibble and its block's absmax
// as a tile of them is staged: shared-memory tiles on CUDA cores, no tensor cores, the GPU twin
// of the CPU's tiled path rather than a tuned GEMM.
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

// The matmuls work on kTile x kTile tiles of the output, one thread an element: the block stages
// a tile of activations and a tile of dequantised weights in shared memory, read from global
// memory in rows (neighbouring threads, neighbouring weights), then each thread adds their
// products in order of the reduction index, so every output sums exactly as a plain loop from 0
// would. Out-of-range elements stage as 0.
constexpr int kTile = 16, kTileElements = kTile * kTile;

// grid (row tiles, token tiles): y[t, o] = sum over i of x[t, i] W[o, i], then + bias[o].
template <class T>
__global__ void forward_kernel(T* y, const T* x, Nf4DeviceWeight w, const T* bias, int64_t tokens) {
  DSX_SHARED(float, xs, kTileElements);
  DSX_SHARED(float, ws, kTileElements);
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int64_t t0 = int64_t(blockIdx.y) * kTile, o0 = int64_t(blockIdx.x) * kTile;
  float acc = 0.0f;
  for (int64_t k = 0; k < w.cols; k += kTile) {
    const int64_t t = t0 + ty, o = o0 + ty, i = k + tx;
    xs[ty * kTile + tx] = t < tokens && i < w.cols ? to_f(x[t * w.cols + i]) : 0.0f;
    ws[ty * kTile + tx] = o < w.rows && i < w.cols ? weight_at(w, o * w.cols + i) : 0.0f;
    __syncthreads();
    for (int kk = 0; kk < kTile; ++kk) acc += xs[ty * kTile + kk] * ws[tx * kTile + kk];
    __syncthreads();  // the tiles are read by all before the next are staged
  }
  const int64_t t = t0 + ty, o = o0 + tx;
  if (t >= tokens || o >= w.rows) return;
  if (bias) acc += to_f(bias[o]);
  y[t * w.rows + o] = from_f<T>(acc);
}

// grid (column tiles, token tiles): dx[t, i] (+)= sum over o of dy[t, o] W[o, i].
template <class T>
__global__ void backward_input_kernel(T* dx, const T* dy, Nf4DeviceWeight w, bool accumulate,
                                      int64_t tokens) {
  DSX_SHARED(float, dys, kTileElements);
  DSX_SHARED(float, ws, kTileElements);
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int64_t t0 = int64_t(blockIdx.y) * kTile, i0 = int64_t(blockIdx.x) * kTile;
  float acc = 0.0f;
  for (int64_t k = 0; k < w.rows; k += kTile) {
    const int64_t t = t0 + ty, o = k + ty, i = i0 + tx;
    dys[ty * kTile + tx] = t < tokens && k + tx < w.rows ? to_f(dy[t * w.rows + k + tx]) : 0.0f;
    ws[ty * kTile + tx] = o < w.rows && i < w.cols ? weight_at(w, o * w.cols + i) : 0.0f;
    __syncthreads();
    for (int kk = 0; kk < kTile; ++kk) acc += dys[ty * kTile + kk] * ws[kk * kTile + tx];
    __syncthreads();
  }
  const int64_t t = t0 + ty, i = i0 + tx;
  if (t >= tokens || i >= w.cols) return;
  T* out = dx + t * w.cols + i;
  *out = from_f<T>(accumulate ? to_f(*out) + acc : acc);
}

unsigned tiles_of(int64_t n) { return static_cast<unsigned>((n + kTile - 1) / kTile); }

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
  DSX_LAUNCH(dim3(tiles_of(w.rows), tiles_of(tokens)), dim3(kTile, kTile), 0, stream,
             forward_kernel<T>)
  (y, x, w, bias, tokens);
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
  DSX_LAUNCH(dim3(tiles_of(w.cols), tiles_of(tokens)), dim3(kTile, kTile), 0, stream,
             backward_input_kernel<T>)
  (dx, dy, w, accumulate, tokens);
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
