// Runs one optimizer kernel on random data at every SIMD level, length and alignment, and checks
// the scalar path against a float64 reference and the vector paths bitwise against the scalar
// path. Buffer 0 is the parameter, buffer 1 the gradient, the rest optimizer state.
#pragma once

#include <functional>
#include <optional>

#include "kernel_test_util.h"
#include "kernels/optimizers.h"

namespace dsx::kernels::test {

// The float64 reference of one element: reads the inputs in[0..n), writes the expected outputs
// of the parameter and of each state buffer, and the magnitude of the terms behind each.
using ElementReference = std::function<void(const double* in, double* out, double* scale)>;
using KernelCall = std::function<void(float* const* buffers, size_t count, ParamCopy copy)>;

// The buffers' starting values: normal (or, where asked, its absolute value), seeded per length.
inline std::vector<FloatBuffer> random_buffers(const std::vector<BufferInit>& init, size_t n, size_t offset) {
  std::vector<FloatBuffer> start;
  for (size_t b = 0; b < init.size(); ++b) {
    start.emplace_back(n, offset);
    if (init[b].non_negative)
      fill_abs_normal(start[b], n, init[b].stddev, uint32_t(100 + b + n));
    else
      fill_normal(start[b], n, init[b].mean, init[b].stddev, uint32_t(100 + b + n));
  }
  return start;
}

// The reference's outputs and term magnitudes, by buffer then element (the gradient's, buffer 1,
// stay zero: it is an input only).
struct ReferenceResults {
  std::vector<std::vector<double>> want, scale;
};

inline ReferenceResults reference_results(const ElementReference& reference, const std::vector<FloatBuffer>& start,
                                          size_t n) {
  const size_t num = start.size();
  ReferenceResults r{std::vector<std::vector<double>>(num, std::vector<double>(n)),
                     std::vector<std::vector<double>>(num, std::vector<double>(n))};
  std::vector<double> in(num), out(num), sc(num);
  for (size_t i = 0; i < n; ++i) {
    for (size_t b = 0; b < num; ++b) in[b] = start[b][i];
    reference(in.data(), out.data(), sc.data());
    for (size_t b = 0; b < num; ++b) {
      if (b == 1) continue;  // the gradient is an input only
      r.want[b][i] = out[b];
      r.scale[b][i] = sc[b];
    }
  }
  return r;
}

// The scalar path against float64: every output buffer, and the 16-bit copy of the parameter
// (the rounded fp32 result, nothing written past its end).
inline void check_scalar_path(const std::vector<FloatBuffer>& work, const std::vector<uint16_t>& copy_out,
                              const std::optional<DType>& copy_dtype, const ReferenceResults& expected, size_t n,
                              size_t offset, const std::string& at) {
  for (size_t b = 0; b < work.size(); ++b) {
    if (b == 1) continue;
    ASSERT_TRUE(near_all(work[b].data(), expected.want[b], expected.scale[b], kFp32Tolerance,
                         at + " buffer " + std::to_string(b)));
  }
  if (!copy_dtype) return;
  for (size_t i = 0; i < n; ++i) {
    ASSERT_EQ(copy_out[offset + i], round_to(*copy_dtype, work[0][i]))
        << at << ": the 16-bit copy of element " << i << " is not the rounded fp32 result";
    // Against float64: one 16-bit rounding (plus fp16's subnormal spacing) on top of fp32's.
    double got = load_as_float(*copy_dtype, copy_out.data() + offset, i);
    double bound = unit_roundoff(*copy_dtype) * std::fabs(expected.want[0][i]) + 0x1p-25 +
                   kFp32Tolerance * expected.scale[0][i];
    ASSERT_LE(std::fabs(got - expected.want[0][i]), bound) << at << ": 16-bit copy of element " << i;
  }
  ASSERT_EQ(copy_out[offset + n], 0xdead) << at << ": wrote past the end of the copy";
}

inline void check_optimizer(const std::string& name, const std::vector<BufferInit>& init,
                            const KernelCall& kernel, const ElementReference& reference,
                            const std::vector<DType>& copy_dtypes = {}) {
  const size_t num = init.size();
  std::vector<std::optional<DType>> copies{std::nullopt};
  for (DType t : copy_dtypes) copies.push_back(t);
  for (size_t n : test_lengths()) {
    for (size_t offset : {size_t{0}, size_t{1}}) {
      if (n > 1000 && offset == 0) continue;  // the large case runs unaligned only, to stay fast
      const std::vector<FloatBuffer> start = random_buffers(init, n, offset);
      const ReferenceResults expected = reference_results(reference, start, n);  // once per length
      for (const auto& copy_dtype : copies) {
        std::string what = name + " n=" + std::to_string(n) + " offset=" + std::to_string(offset) +
                           " copy=" + (copy_dtype ? dtype_name(*copy_dtype) : "none");
        std::vector<FloatBuffer> baseline;
        std::vector<uint16_t> baseline_copy;
        for (SimdLevel level : supported_levels()) {
          ScopedSimdLevel scoped(level);
          std::vector<FloatBuffer> work = start;
          std::vector<float*> ptrs;
          for (auto& b : work) ptrs.push_back(b.data());
          std::vector<uint16_t> copy_out(n + offset + 1, 0xdead);
          ParamCopy copy;
          if (copy_dtype) copy = {*copy_dtype, copy_out.data() + offset};
          kernel(ptrs.data(), n, copy);
          std::string at = what + " simd=" + simd_level_name(level);
          if (level == SimdLevel::Scalar) {
            ASSERT_NO_FATAL_FAILURE(check_scalar_path(work, copy_out, copy_dtype, expected, n, offset, at));
            baseline = work;
            baseline_copy = copy_out;
          } else {
            for (size_t b = 0; b < num; ++b)
              ASSERT_TRUE(
                  bitwise_equal(work[b].data(), baseline[b].data(), n * sizeof(float),
                                at + " buffer " + std::to_string(b) + " vs the scalar path"));
            ASSERT_TRUE(bitwise_equal(copy_out.data(), baseline_copy.data(), copy_out.size() * 2,
                                      at + " 16-bit copy vs the scalar path"));
          }
        }
      }
    }
  }
}

}  // namespace dsx::kernels::test
