// Mixed-precision helpers and reductions on the GPU (kernels/cuda/mixed_precision.h): the
// element-wise ones are one grid-stride launch with 4-element vector accesses where aligned;
// sum_of_squares is a fixed-shape two-kernel reduction so its result is reproducible.
#include <algorithm>
#include <cfloat>

#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/mixed_precision.h"

namespace dsx::kernels::cuda {
namespace {

constexpr unsigned kSumBlocks = 1024;  // fixed, so every GPU adds in the same order

__device__ __forceinline__ bool non_finite(float v) { return !(fabsf(v) <= FLT_MAX); }

template <DType T>
struct CheckOp {
  const void* x;
  int* found_inf;
  template <int W>
  __device__ void apply(size_t i) const {
    Lanes<W> X = load_lanes<T, W>(x, i);
    bool bad = false;
#pragma unroll
    for (int k = 0; k < W; ++k) bad |= non_finite(X.v[k]);
    if (bad) *found_inf = 1;
  }
};

template <DType S, DType D>
struct CastOp {
  const void* src;
  void* dst;
  template <int W>
  __device__ void apply(size_t i) const {
    store_lanes<D, W>(dst, i, load_lanes<S, W>(src, i));
  }
};

template <DType T>
struct ScaleOp {
  void* x;
  float factor;
  template <int W>
  __device__ void apply(size_t i) const {
    Lanes<W> X = load_lanes<T, W>(x, i);
#pragma unroll
    for (int k = 0; k < W; ++k) X.v[k] *= factor;
    store_lanes<T, W>(x, i, X);
  }
};

template <DType T>
struct UnscaleOp {
  void* x;
  float factor;
  int* found_inf;
  template <int W>
  __device__ void apply(size_t i) const {
    ScaleOp<T>{x, factor}.template apply<W>(i);
    CheckOp<T>{x, found_inf}.template apply<W>(i);  // what was stored: an fp16 overflow shows here
  }
};

template <DType S, DType D>
struct SumBlocksOp {
  const void* src;
  size_t blocks, stride;
  float factor;
  void* dst;
  bool accumulate;
  template <int W>
  __device__ void apply(size_t i) const {
#pragma unroll
    for (int k = 0; k < W; ++k) {
      float v = factor * block_sum_element<S>(src, blocks, stride, i + k);
      store_element<D>(dst, i + k, accumulate ? load_element<D>(dst, i + k) + v : v);
    }
  }
};

template <DType T, ReduceOp kOp>
struct ReduceIntoOp {
  void* dst;
  const void* src;
  template <int W>
  __device__ void apply(size_t i) const {
    Lanes<W> A = load_lanes<T, W>(dst, i), B = load_lanes<T, W>(src, i);
#pragma unroll
    for (int k = 0; k < W; ++k) A.v[k] = reduce_element(kOp, A.v[k], B.v[k]);
    store_lanes<T, W>(dst, i, A);
  }
};

template <DType T>
__global__ void sum_squares_partial_kernel(const void* x, size_t count, double* partials) {
  double sum = 0.0, unused = 0.0;
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += size_t(gridDim.x) * blockDim.x) {
    double v = load_element<T>(x, i);
    sum += v * v;
  }
  block_sum2(sum, unused);
  if (threadIdx.x == 0) partials[blockIdx.x] = sum;
}

__global__ void sum_partials_kernel(const double* partials, unsigned n, double* out) {
  double sum = 0.0, unused = 0.0;
  for (unsigned b = threadIdx.x; b < n; b += blockDim.x) sum += partials[b];
  block_sum2(sum, unused);
  if (threadIdx.x == 0) *out = sum;
}

__global__ void narrow_kernel(const double* src, float* dst, size_t count) {
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += size_t(gridDim.x) * blockDim.x)
    dst[i] = static_cast<float>(src[i]);
}

__global__ void zero_grad_factor_kernel(DeviceSumOfSquares sum_sq, double loss_scale,
                                        double max_norm, float* factor) {
  const double s = sum_sq.fp32 ? double(*static_cast<const float*>(sum_sq.data))
                               : *static_cast<const double*>(sum_sq.data);
  *factor = kernels::zero_grad_factor(s, loss_scale, max_norm);
}

}  // namespace

void unscale_and_check(DType dtype, void* x, float factor, size_t count, int* found_inf,
                       cudaStream_t stream) {
  DSX_TOUCHES(DSX_WRITES(x, count * dtype_size(dtype)), DSX_WRITES(found_inf, sizeof(int)));
  dispatch_dtype(dtype, [&](auto tag) {
    constexpr DType T = decltype(tag)::value;
    launch_elementwise("unscale_and_check", UnscaleOp<T>{x, factor, found_inf}, count,
                       vector_ok(T, x), stream);
  });
}

void has_inf_or_nan(DType dtype, const void* x, size_t count, int* found_inf, cudaStream_t stream) {
  DSX_TOUCHES(DSX_READS(x, count * dtype_size(dtype)), DSX_WRITES(found_inf, sizeof(int)));
  dispatch_dtype(dtype, [&](auto tag) {
    constexpr DType T = decltype(tag)::value;
    launch_elementwise("has_inf_or_nan", CheckOp<T>{x, found_inf}, count, vector_ok(T, x), stream);
  });
}

size_t sum_of_squares_workspace_bytes() { return kSumBlocks * sizeof(double); }

void sum_of_squares(DType dtype, const void* x, size_t count, double* out, void* workspace,
                    cudaStream_t stream) {
  auto* partials = static_cast<double*>(workspace);
  DSX_TOUCHES(DSX_READS(x, count * dtype_size(dtype)), DSX_WRITES(partials, kSumBlocks * sizeof(double)));
  dispatch_dtype(dtype, [&](auto tag) {
    DSX_LAUNCH(kSumBlocks, kBlock, 0, stream,
               sum_squares_partial_kernel<decltype(tag)::value>)(x, count, partials);
  });
  check_launch("sum_squares_partial_kernel");
  DSX_TOUCHES(DSX_READS(partials, kSumBlocks * sizeof(double)), DSX_WRITES(out, sizeof(double)));
  DSX_LAUNCH(1, 1024, 0, stream, sum_partials_kernel)(partials, kSumBlocks, out);
  check_launch("sum_partials_kernel");
}

void narrow_to_float(const double* src, float* dst, size_t count, cudaStream_t stream) {
  if (count == 0) return;
  DSX_TOUCHES(DSX_READS(src, count * sizeof(double)), DSX_WRITES(dst, count * sizeof(float)));
  const size_t blocks = std::min<size_t>(kSumBlocks, (count + kBlock - 1) / kBlock);
  DSX_LAUNCH(static_cast<unsigned>(blocks), kBlock, 0, stream, narrow_kernel)(src, dst, count);
  check_launch("narrow_kernel");
}

void zero_grad_factor(DeviceSumOfSquares sum_sq, double loss_scale, double max_norm, float* factor,
                      cudaStream_t stream) {
  DSX_TOUCHES(DSX_READS(sum_sq.data, sum_sq.fp32 ? sizeof(float) : sizeof(double)),
              DSX_WRITES(factor, sizeof(float)));
  DSX_LAUNCH(1, 1, 0, stream, zero_grad_factor_kernel)(sum_sq, loss_scale, max_norm, factor);
  check_launch("zero_grad_factor_kernel");
}

void cast(DType src_dtype, const void* src, DType dst_dtype, void* dst, size_t count,
          cudaStream_t stream) {
  DSX_TOUCHES(DSX_READS(src, count * dtype_size(src_dtype)), DSX_WRITES(dst, count * dtype_size(dst_dtype)));
  dispatch_dtype(src_dtype, [&](auto s) {
    dispatch_dtype(dst_dtype, [&](auto d) {
      constexpr DType S = decltype(s)::value, D = decltype(d)::value;
      launch_elementwise("cast", CastOp<S, D>{src, dst}, count,
                         vector_ok(S, src) && vector_ok(D, dst), stream);
    });
  });
}

void scale(DType dtype, void* x, float factor, size_t count, cudaStream_t stream) {
  DSX_TOUCHES(DSX_WRITES(x, count * dtype_size(dtype)));
  dispatch_dtype(dtype, [&](auto tag) {
    constexpr DType T = decltype(tag)::value;
    launch_elementwise("scale", ScaleOp<T>{x, factor}, count, vector_ok(T, x), stream);
  });
}

void sum_blocks(DType src_dtype, const void* src, size_t blocks, size_t stride, float factor, DType dst_dtype,
                void* dst, size_t count, bool accumulate, cudaStream_t stream) {
  if (blocks == 0) return;
  DSX_TOUCHES(DSX_READS(src, ((blocks - 1) * stride + count) * dtype_size(src_dtype)),
              DSX_WRITES(dst, count * dtype_size(dst_dtype)));
  dispatch_dtype(src_dtype, [&](auto s) {
    dispatch_dtype(dst_dtype, [&](auto d) {
      constexpr DType S = decltype(s)::value, D = decltype(d)::value;
      launch_elementwise("sum_blocks", SumBlocksOp<S, D>{src, blocks, stride, factor, dst, accumulate}, count, false,
                         stream);
    });
  });
}

void reduce_into(DType dtype, ReduceOp op, void* dst, const void* src, size_t count,
                 cudaStream_t stream) {
  DSX_TOUCHES(DSX_WRITES(dst, count * dtype_size(dtype)), DSX_READS(src, count * dtype_size(dtype)));
  dispatch_dtype(dtype, [&](auto tag) {
    constexpr DType T = decltype(tag)::value;
    bool vec = vector_ok(T, dst) && vector_ok(T, src);
    switch (op) {
      case ReduceOp::Sum:
      case ReduceOp::Avg:
        launch_elementwise("reduce_into", ReduceIntoOp<T, ReduceOp::Sum>{dst, src}, count, vec,
                           stream);
        break;
      case ReduceOp::Max:
        launch_elementwise("reduce_into", ReduceIntoOp<T, ReduceOp::Max>{dst, src}, count, vec,
                           stream);
        break;
      case ReduceOp::Min:
        launch_elementwise("reduce_into", ReduceIntoOp<T, ReduceOp::Min>{dst, src}, count, vec,
                           stream);
        break;
    }
  });
}

}  // namespace dsx::kernels::cuda
