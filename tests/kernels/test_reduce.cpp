// reduce_into, scale and sum_blocks against a float64 (or the formula's fp32) reference, for every
// dtype, op and SIMD level.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "kernel_test_util.h"
#include "kernels/reduce.h"

namespace dsx::kernels {
namespace {

std::vector<uint8_t> random_buffer(DType t, size_t n, uint32_t seed) {
  std::vector<uint8_t> b(n * dtype_size(t) + 1);
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.f, 3.f);
  for (size_t i = 0; i < n; ++i) store_from_float(t, b.data() + 1, i, dist(rng));  // +1: unaligned
  return b;
}

double reference(ReduceOp op, double a, double b) {
  switch (op) {
    case ReduceOp::Sum:
    case ReduceOp::Avg:
      return a + b;
    case ReduceOp::Max:
      return std::max(a, b);
    default:
      return std::min(a, b);
  }
}

TEST(Reduce, MatchesFloat64ReferenceRoundedOnce) {
  for (SimdLevel level : test::supported_levels()) {
    test::ScopedSimdLevel scoped(level);
    for (DType t : {DType::F32, DType::F16, DType::BF16}) {
      for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Max, ReduceOp::Min}) {
        for (size_t n :
             {size_t{0}, size_t{1}, size_t{15}, size_t{16}, size_t{17}, size_t{100003}}) {
          auto dst = random_buffer(t, n, 1);
          auto src = random_buffer(t, n, 2);
          auto before = dst;
          reduce_into(t, op, dst.data() + 1, src.data() + 1, n);
          for (size_t i = 0; i < n; ++i) {
            double want = reference(op, load_as_float(t, before.data() + 1, i),
                                    load_as_float(t, src.data() + 1, i));
            // The fp32 sum of two 16-bit values is exact, so the only error is the final rounding,
            // which must be the round-to-nearest-even of the exact result.
            uint8_t rounded[4];
            store_from_float(t, rounded, 0, static_cast<float>(want));
            ASSERT_EQ(load_as_float(t, dst.data() + 1, i), load_as_float(t, rounded, 0))
                << simd_level_name(level) << " " << dtype_name(t) << " " << reduce_op_name(op)
                << " n=" << n << " i=" << i;
          }
        }
      }
    }
  }
}

TEST(Reduce, MaxAndMinPropagateNaN) {
  float nan = std::numeric_limits<float>::quiet_NaN();
  for (ReduceOp op : {ReduceOp::Max, ReduceOp::Min, ReduceOp::Sum}) {
    float dst[3] = {1.f, nan, 2.f};
    float src[3] = {nan, 1.f, 3.f};
    reduce_into(DType::F32, op, dst, src, 3);
    EXPECT_TRUE(std::isnan(dst[0]));
    EXPECT_TRUE(std::isnan(dst[1]));
    EXPECT_FALSE(std::isnan(dst[2]));
  }
}

TEST(Scale, MatchesFloat64Reference) {
  for (SimdLevel level : test::supported_levels()) {
    test::ScopedSimdLevel scoped(level);
    for (DType t : {DType::F32, DType::F16, DType::BF16}) {
      for (size_t n : {size_t{0}, size_t{1}, size_t{15}, size_t{16}, size_t{17}, size_t{100003}}) {
        auto x = random_buffer(t, n, 3);
        auto before = x;
        scale(t, x.data() + 1, 0.125f, n);
        for (size_t i = 0; i < n; ++i) {
          uint8_t rounded[4];
          store_from_float(t, rounded, 0, load_as_float(t, before.data() + 1, i) * 0.125f);
          ASSERT_EQ(load_as_float(t, x.data() + 1, i), load_as_float(t, rounded, 0))
              << simd_level_name(level) << " " << dtype_name(t) << " i=" << i;
        }
      }
    }
  }
}

// One block (ZeRO's pack and unpack) takes its own loop: the same bits as the formula of
// kernels/reduce.h, dst (+)= factor * src in fp32 rounded once, at every level and dtype pair,
// unaligned.
TEST(SumBlocks, OneBlockIsTheFormulaBitForBit) {
  for (SimdLevel level : test::supported_levels()) {
    test::ScopedSimdLevel scoped(level);
    for (DType from : {DType::F32, DType::BF16}) {
      for (DType to : {DType::F32, DType::BF16}) {
        for (bool accumulate : {false, true}) {
          const size_t n = 100003;
          auto src = random_buffer(from, n, 5);
          auto dst = random_buffer(to, n, 6);
          const auto before = dst;
          sum_blocks(from, src.data() + 1, 1, 0, 0.5f, to, dst.data() + 1, n, accumulate);
          for (size_t i = 0; i < n; ++i) {
            const float v = 0.5f * load_as_float(from, src.data() + 1, i);
            uint8_t want[4];
            store_from_float(to, want, 0,
                             accumulate ? load_as_float(to, before.data() + 1, i) + v : v);
            ASSERT_EQ(std::memcmp(dst.data() + 1 + i * dtype_size(to), want, dtype_size(to)), 0)
                << simd_level_name(level) << " " << dtype_name(from) << "->" << dtype_name(to)
                << (accumulate ? " accumulate" : "") << " i=" << i;
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace dsx::kernels
