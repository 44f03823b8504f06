// Launch plumbing shared by the kernels/cuda/*.cu files (internal): error checks that throw
// dsx::Error, grid sizing, and loads/stores of W consecutive elements of any dtype as fp32 lanes
// (W = 4 becomes one 16-byte fp32 or 8-byte fp16/bf16 access when the caller checked alignment).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "dsx/error.h"
#include "kernels/dtype.h"

// Kernels launch through DSX_LAUNCH(grid, block, shared_bytes, stream, kernel)(args...) and
// declare shared memory with DSX_SHARED(T, name, count) (a dsx_shared_ptr<T> where a function
// takes it), so that the emulated GPU (tests/emulated_gpu) can build the same source with the
// host compiler, run each launch with its shape and check every shared access for races.
// DSX_TOUCHES(DSX_READS(p, bytes), DSX_WRITES(q, bytes), ...) before a launch declares what the
// kernel reads and writes, for the emulated GPU's stream-order check; nvcc drops it.
#ifndef DSX_LAUNCH
// Under nvcc the declarations are not evaluated, but their names count as used.
struct DsxLaunchTouch {
  const void* data;
  size_t bytes;
};
template <class... Touches>
int dsx_launch_touches_unused(const Touches&...);
#define DSX_READS(data, bytes) DsxLaunchTouch{(data), (bytes)}
#define DSX_WRITES(data, bytes) DsxLaunchTouch{(data), (bytes)}
#define DSX_TOUCHES(...) static_cast<void>(sizeof(dsx_launch_touches_unused(__VA_ARGS__)))
#define DSX_LAUNCH(grid, block, shared_bytes, stream, ...) \
  __VA_ARGS__<<<grid, block, shared_bytes, stream>>>
#define DSX_SHARED(T, name, count) __shared__ T name[count]
template <class T>
using dsx_shared_ptr = T*;
#endif

namespace dsx::kernels::cuda {

inline constexpr int kBlock = 256;  // threads per block of the element-wise kernels
inline constexpr int kVec = 4;      // elements per thread per iteration on the vector path

// Throws when the last launch on this thread failed (bad configuration, no device, ...).
inline void check_launch(const char* kernel) {
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess)
    throw Error(ErrorKind::Internal,
                std::string("CUDA kernel ") + kernel +
                    " failed to launch: " + cudaGetErrorString(e) +
                    ". Check that a GPU is visible and the pointers are device memory.");
}

// Enough blocks to fill the GPU a few times over; the kernels stride over the rest.
inline unsigned grid_for(size_t items) {
  static const int max_blocks = [] {
    int device = 0, sms = 0;
    if (cudaGetDevice(&device) != cudaSuccess ||
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess ||
        sms <= 0)
      sms = 132;
    return sms * 8;
  }();
  size_t blocks = (items + kBlock - 1) / kBlock;
  if (blocks < 1) blocks = 1;
  return static_cast<unsigned>(blocks < size_t(max_blocks) ? blocks : size_t(max_blocks));
}

inline bool aligned(const void* p, size_t bytes) {
  return reinterpret_cast<uintptr_t>(p) % bytes == 0;
}

// Whether a buffer of dtype t can take kVec-element vector accesses.
inline bool vector_ok(DType t, const void* p) {
  return p == nullptr || aligned(p, kVec * dtype_size(t));
}

template <int W>
struct Lanes {
  float v[W];
};

template <DType T, int W>
__device__ __forceinline__ Lanes<W> load_lanes(const void* p, size_t i) {
  Lanes<W> out;
  if constexpr (W == 4 && T == DType::F32) {
    float4 q = *reinterpret_cast<const float4*>(static_cast<const float*>(p) + i);
    out.v[0] = q.x, out.v[1] = q.y, out.v[2] = q.z, out.v[3] = q.w;
  } else if constexpr (W == 4) {
    uint2 q = *reinterpret_cast<const uint2*>(static_cast<const uint16_t*>(p) + i);
    uint16_t h[4] = {uint16_t(q.x & 0xffff), uint16_t(q.x >> 16), uint16_t(q.y & 0xffff),
                     uint16_t(q.y >> 16)};
#pragma unroll
    for (int k = 0; k < 4; ++k)
      out.v[k] = T == DType::F16 ? fp16_to_float(h[k]) : bf16_to_float(h[k]);
  } else {
#pragma unroll
    for (int k = 0; k < W; ++k) out.v[k] = load_element<T>(p, i + k);
  }
  return out;
}

template <DType T, int W>
__device__ __forceinline__ void store_lanes(void* p, size_t i, const Lanes<W>& in) {
  if constexpr (W == 4 && T == DType::F32) {
    *reinterpret_cast<float4*>(static_cast<float*>(p) + i) =
        make_float4(in.v[0], in.v[1], in.v[2], in.v[3]);
  } else if constexpr (W == 4) {
    uint16_t h[4];
#pragma unroll
    for (int k = 0; k < 4; ++k)
      h[k] = T == DType::F16 ? float_to_fp16(in.v[k]) : float_to_bf16(in.v[k]);
    *reinterpret_cast<uint2*>(static_cast<uint16_t*>(p) + i) = make_uint2(
        uint32_t(h[0]) | (uint32_t(h[1]) << 16), uint32_t(h[2]) | (uint32_t(h[3]) << 16));
  } else {
#pragma unroll
    for (int k = 0; k < W; ++k) store_element<T>(p, i + k, in.v[k]);
  }
}

// Runs op.template apply<W>(i) over [0, count): with W = kVec on whole vectors and W = 1 on the
// tail when `vectorised`, else W = 1 everywhere. One grid-stride launch.
template <class Op>
__global__ void elementwise_kernel(Op op, size_t count, bool vectorised) {
  size_t tid = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  size_t stride = size_t(gridDim.x) * blockDim.x;
  size_t head = 0;
  if (vectorised) {
    size_t vecs = count / kVec;
    for (size_t k = tid; k < vecs; k += stride) op.template apply<kVec>(k * kVec);
    head = vecs * kVec;
  }
  for (size_t i = head + tid; i < count; i += stride) op.template apply<1>(i);
}

template <class Op>
void launch_elementwise(const char* name, const Op& op, size_t count, bool vectorised,
                        cudaStream_t stream) {
  if (count == 0) return;
  unsigned grid = grid_for(vectorised ? (count + kVec - 1) / kVec : count);
  DSX_LAUNCH(grid, kBlock, 0, stream, elementwise_kernel)(op, count, vectorised);
  check_launch(name);
}

// The optional 16-bit copy of the optimizers as a compile-time dtype: kCopyNone or a DType.
inline constexpr int kCopyNone = -1;

template <int kCopy, int W>
__device__ __forceinline__ void store_copy(void* copy, size_t i, const Lanes<W>& p) {
  if constexpr (kCopy != kCopyNone) store_lanes<static_cast<DType>(kCopy), W>(copy, i, p);
}

// Calls f(std::integral_constant<int, kCopy>) for the copy's dtype (or kCopyNone).
template <class F>
void dispatch_copy(const void* data, DType dtype, F&& f) {
  if (!data) return f(std::integral_constant<int, kCopyNone>{});
  switch (dtype) {
    case DType::F32:
      return f(std::integral_constant<int, int(DType::F32)>{});
    case DType::F16:
      return f(std::integral_constant<int, int(DType::F16)>{});
    default:
      return f(std::integral_constant<int, int(DType::BF16)>{});
  }
}

}  // namespace dsx::kernels::cuda

namespace dsx::kernels::cuda {

// Sums a and b over the block (blockDim.x a multiple of 32, at most 1024); thread 0 receives the
// totals. Warp shuffles then one warp over the warp sums: a fixed order, so the same bits every
// run. Uses static shared memory: call it once per kernel.
__device__ __forceinline__ void block_sum2(double& a, double& b) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) {
    a += __shfl_down_sync(0xffffffffu, a, off);
    b += __shfl_down_sync(0xffffffffu, b, off);
  }
  DSX_SHARED(double, warp_a, 32);
  DSX_SHARED(double, warp_b, 32);
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) {
    warp_a[warp] = a;
    warp_b[warp] = b;
  }
  __syncthreads();
  if (warp == 0) {
    int warps = blockDim.x >> 5;
    a = lane < warps ? warp_a[lane] : 0.0;
    b = lane < warps ? warp_b[lane] : 0.0;
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) {
      a += __shfl_down_sync(0xffffffffu, a, off);
      b += __shfl_down_sync(0xffffffffu, b, off);
    }
  }
}

}  // namespace dsx::kernels::cuda
