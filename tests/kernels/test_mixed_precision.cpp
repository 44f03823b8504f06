// unscale_and_check, has_inf_or_nan, sum_of_squares and cast for every dtype at every SIMD
// level, lengths 0..1000003, aligned and unaligned, against float64 / exact references.
#include <cmath>
#include <limits>

#include "kernel_test_util.h"
#include "kernels/mixed_precision.h"

namespace dsx::kernels::test {
namespace {

const DType kDTypes[] = {DType::F32, DType::F16, DType::BF16};

// A buffer of `count` elements of dtype t starting `offset` elements into its storage.
struct TypedBuffer {
  DType dtype;
  size_t offset;
  std::vector<uint8_t> bytes;
  TypedBuffer(DType t, size_t count, size_t off, uint32_t seed, float stddev = 3.0f)
      : dtype(t), offset(off), bytes((count + off + 1) * dtype_size(t)) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> dist(0.f, stddev);
    for (size_t i = 0; i < count; ++i) set(i, dist(rng));
  }
  void* data() { return bytes.data() + offset * dtype_size(dtype); }
  float get(size_t i) const {
    return load_as_float(dtype, bytes.data() + offset * dtype_size(dtype), i);
  }
  void set(size_t i, float v) { store_from_float(dtype, data(), i, v); }
};

float rounded(DType t, float v) {
  uint8_t tmp[4];
  store_from_float(t, tmp, 0, v);
  return load_as_float(t, tmp, 0);
}

TEST(UnscaleAndCheck, ScalesExactlyAndFindsEveryInfOrNan) {
  for (SimdLevel level : supported_levels()) {
    ScopedSimdLevel scoped(level);
    for (DType t : kDTypes) {
      for (size_t n : test_lengths()) {
        std::string at =
            std::string(simd_level_name(level)) + " " + dtype_name(t) + " n=" + std::to_string(n);
        TypedBuffer x(t, n, 1, 7);
        const TypedBuffer before = x;
        EXPECT_FALSE(unscale_and_check(t, x.data(), 1.0f / 1024, n)) << at;
        for (size_t i = 0; i < n; ++i)
          ASSERT_EQ(x.get(i), rounded(t, before.get(i) * (1.0f / 1024))) << at << " element " << i;
        if (n == 0) continue;
        // One bad value at the start, in the middle and in the tail: each must be found.
        for (size_t pos : {size_t{0}, n / 2, n - 1}) {
          for (float bad :
               {std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                std::numeric_limits<float>::quiet_NaN()}) {
            TypedBuffer y = before;
            y.set(pos, bad);
            EXPECT_TRUE(has_inf_or_nan(t, y.data(), n)) << at << " bad at " << pos;
            EXPECT_TRUE(unscale_and_check(t, y.data(), 0.5f, n)) << at << " bad at " << pos;
          }
        }
      }
    }
    // An fp16 value that overflows only after scaling is reported too.
    TypedBuffer h(DType::F16, 3, 0, 9);
    h.set(1, 60000.0f);
    EXPECT_TRUE(unscale_and_check(DType::F16, h.data(), 2.0f, 3));
  }
}

TEST(SumOfSquares, MatchesFloat64ReferenceOnEveryPath) {
  for (SimdLevel level : supported_levels()) {
    ScopedSimdLevel scoped(level);
    for (DType t : kDTypes) {
      for (size_t n : test_lengths()) {
        TypedBuffer x(t, n, 1, 11);
        long double want = 0;
        for (size_t i = 0; i < n; ++i) want += static_cast<long double>(x.get(i)) * x.get(i);
        double got = sum_of_squares(t, x.data(), n);
        // Recursive summation of non-negative terms: error at most (n - 1) roundings of the sum.
        EXPECT_NEAR(got, double(want), double(n) * 0x1p-53 * double(want))
            << simd_level_name(level) << " " << dtype_name(t) << " n=" << n;
      }
    }
  }
}

// 2^24 + 4096 ones: an fp32 accumulator stops at 2^24; the float64 lanes must count them all.
TEST(SumOfSquares, StaysExactWhereFloatAccumulationStalls) {
  size_t n = (size_t{1} << 24) + 4096;
  std::vector<uint16_t> ones(n, float_to_bf16(1.0f));
  for (SimdLevel level : supported_levels()) {
    ScopedSimdLevel scoped(level);
    EXPECT_EQ(sum_of_squares(DType::BF16, ones.data(), n), double(n)) << simd_level_name(level);
  }
}

TEST(SumOfSquares, InfAndNanReachTheResult) {
  float x[3] = {1, std::numeric_limits<float>::infinity(), 2};
  EXPECT_TRUE(std::isinf(sum_of_squares(DType::F32, x, 3)));
  x[1] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_TRUE(std::isnan(sum_of_squares(DType::F32, x, 3)));
}

TEST(Cast, EveryPairRoundsToNearestEven) {
  for (SimdLevel level : supported_levels()) {
    ScopedSimdLevel scoped(level);
    for (DType from : kDTypes) {
      for (DType to : kDTypes) {
        for (size_t n : test_lengths()) {
          TypedBuffer src(from, n, 1, 13, 1e3f);
          if (n > 2) src.set(1, std::numeric_limits<float>::quiet_NaN());
          TypedBuffer dst(to, n, 1, 14);
          cast(from, src.data(), to, dst.data(), n);
          for (size_t i = 0; i < n; ++i) {
            float want = rounded(to, src.get(i));
            float got = dst.get(i);
            ASSERT_TRUE(got == want || (std::isnan(got) && std::isnan(want)))
                << simd_level_name(level) << " " << dtype_name(from) << "->" << dtype_name(to)
                << " n=" << n << " element " << i << ": " << got << " vs " << want;
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace dsx::kernels::test
