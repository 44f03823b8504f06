// CPU element-wise reductions and scale (kernels/reduce.h), SIMD + OpenMP.
#include "kernels/reduce.h"

#include "kernels/cpu/loops.h"

namespace dsx::kernels {
namespace {

template <DType T, ReduceOp kOp>
void reduce_typed(void* dst, const void* src, size_t count) {
  cpu::for_each_element(count, [=](size_t i) DSX_ALWAYS_INLINE {
    store_element<T>(dst, i, reduce_element(kOp, load_element<T>(dst, i), load_element<T>(src, i)));
  });
}

// sum_blocks of one block, the same arithmetic: dst[i] (+)= factor * src[i], in fp32.
template <DType S, DType D>
void sum_one_block(const void* src, float factor, void* dst, size_t count, bool accumulate) {
  if (accumulate) {
    cpu::for_each_element(count, [=](size_t i) DSX_ALWAYS_INLINE {
      store_element<D>(dst, i, load_element<D>(dst, i) + factor * load_element<S>(src, i));
    });
  } else {
    cpu::for_each_element(count, [=](size_t i) DSX_ALWAYS_INLINE {
      store_element<D>(dst, i, factor * load_element<S>(src, i));
    });
  }
}

}  // namespace

void reduce_into(DType dtype, ReduceOp op, void* dst, const void* src, size_t count) {
  dispatch_dtype(dtype, [&](auto tag) {
    constexpr DType T = decltype(tag)::value;
    switch (op) {
      case ReduceOp::Sum:
      case ReduceOp::Avg:
        reduce_typed<T, ReduceOp::Sum>(dst, src, count);
        break;
      case ReduceOp::Max:
        reduce_typed<T, ReduceOp::Max>(dst, src, count);
        break;
      case ReduceOp::Min:
        reduce_typed<T, ReduceOp::Min>(dst, src, count);
        break;
    }
  });
}

void scale(DType dtype, void* x, float factor, size_t count) {
  dispatch_dtype(dtype, [&](auto tag) {
    constexpr DType T = decltype(tag)::value;
    cpu::for_each_element(count, [=](size_t i) DSX_ALWAYS_INLINE {
      store_element<T>(x, i, load_element<T>(x, i) * factor);
    });
  });
}

void sum_blocks(DType src_dtype, const void* src, size_t blocks, size_t stride, float factor, DType dst_dtype,
                void* dst, size_t count, bool accumulate) {
  if (blocks == 0) return;
  dispatch_dtype(src_dtype, [&](auto src_tag) {
    dispatch_dtype(dst_dtype, [&](auto dst_tag) {
      constexpr DType S = decltype(src_tag)::value, D = decltype(dst_tag)::value;
      // One block is ZeRO's pack and unpack: without the loop over blocks the loop vectorizes.
      if (blocks == 1) {
        sum_one_block<S, D>(src, factor, dst, count, accumulate);
        return;
      }
      if (accumulate) {
        cpu::for_each_element(count, [=](size_t i) DSX_ALWAYS_INLINE {
          store_element<D>(dst, i, load_element<D>(dst, i) + factor * block_sum_element<S>(src, blocks, stride, i));
        });
      } else {
        cpu::for_each_element(count, [=](size_t i) DSX_ALWAYS_INLINE {
          store_element<D>(dst, i, factor * block_sum_element<S>(src, blocks, stride, i));
        });
      }
    });
  });
}

}  // namespace dsx::kernels
