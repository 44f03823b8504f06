// CPU element-wise reductions and scale (kernels/reduce.h), OpenMP over large buffers.
#include "kernels/reduce.h"

#include <omp.h>

namespace dsx::kernels {
namespace {

// Below this many elements, threads cost more than they save.
constexpr size_t kParallelMin = 1 << 15;

template <typename Load, typename Store>
void for_each_element(size_t count, Load&& load, Store&& store) {
#pragma omp parallel for schedule(static) if (count >= kParallelMin)
  for (size_t i = 0; i < count; ++i) store(i, load(i));
}

}  // namespace

void reduce_into(DType dtype, ReduceOp op, void* dst, const void* src, size_t count) {
  for_each_element(
      count,
      [&](size_t i) { return reduce_element(op, load_as_float(dtype, dst, i), load_as_float(dtype, src, i)); },
      [&](size_t i, float v) { store_from_float(dtype, dst, i, v); });
}

void scale(DType dtype, void* x, float factor, size_t count) {
  for_each_element(
      count, [&](size_t i) { return load_as_float(dtype, x, i) * factor; },
      [&](size_t i, float v) { store_from_float(dtype, x, i, v); });
}

}  // namespace dsx::kernels
