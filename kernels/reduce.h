// Element-wise reductions used by the comm layer: dst = dst op src over fp32/fp16/bf16 buffers,
// and scale (x *= factor). fp16/bf16 elements are computed in fp32 and rounded back to nearest
// even, as NCCL does for its half types. ReduceOp::Avg reduces like Sum; the caller divides by
// the world size afterwards with scale(), once, after the last reduction step.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/dtype.h"

namespace dsx::kernels {

enum class ReduceOp : uint8_t { Sum, Avg, Max, Min };

inline constexpr const char* reduce_op_name(ReduceOp op) {
  return op == ReduceOp::Sum   ? "sum"
         : op == ReduceOp::Avg ? "avg"
         : op == ReduceOp::Max ? "max"
                               : "min";
}

// One element of a reduction in fp32. Max/Min propagate NaN (like NCCL and torch.maximum), so a
// NaN gradient on any rank reaches every rank and the overflow check sees it.
DSX_HD float reduce_element(ReduceOp op, float a, float b) {
  switch (op) {
    case ReduceOp::Sum:
    case ReduceOp::Avg:
      return a + b;
    case ReduceOp::Max:
      return (a != a || b != b) ? a + b : (a > b ? a : b);
    default:
      return (a != a || b != b) ? a + b : (a < b ? a : b);
  }
}

// dst[i] = dst[i] op src[i] for i < count. dst and src may be unaligned; they must not overlap
// unless they are the same pointer.
void reduce_into(DType dtype, ReduceOp op, void* dst, const void* src, size_t count);

// x[i] *= factor for i < count (fp16/bf16 computed in fp32, rounded to nearest even).
void scale(DType dtype, void* x, float factor, size_t count);

// The sum of element i over `blocks` blocks of a buffer (block b starts at element b * stride),
// in fp32 and in block order: how ZeRO unpacks reduced gradients from a communication buffer.
template <DType T>
DSX_HD float block_sum_element(const void* src, size_t blocks, size_t stride, size_t i) {
  float v = load_element<T>(src, i);
  for (size_t b = 1; b < blocks; ++b) v += load_element<T>(src, b * stride + i);
  return v;
}

// dst[i] = factor * (sum over blocks of src), added to dst[i] when `accumulate`; computed in
// fp32 and rounded once to dst's dtype. CUDA twin: kernels/cuda/mixed_precision.h.
void sum_blocks(DType src_dtype, const void* src, size_t blocks, size_t stride, float factor, DType dst_dtype,
                void* dst, size_t count, bool accumulate);

}  // namespace dsx::kernels
