// The 16-bit conversions of kernels/dtype.h against the compiler's _Float16 (IEEE binary16,
// round to nearest even): every fp16 value decoded, and fp32 values swept across every exponent.
#include <gtest/gtest.h>

#include <cmath>

#include "kernels/dtype.h"

namespace dsx::kernels {
namespace {

uint16_t half_bits(_Float16 h) {
  uint16_t u;
  std::memcpy(&u, &h, 2);
  return u;
}

TEST(DType, EveryFp16DecodesLikeFloat16) {
  for (uint32_t h = 0; h < 65536; ++h) {
    _Float16 ref;
    uint16_t bits = static_cast<uint16_t>(h);
    std::memcpy(&ref, &bits, 2);
    float want = static_cast<float>(ref), got = fp16_to_float(bits);
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(got)) << std::hex << h;
    } else {
      ASSERT_EQ(float_bits(got), float_bits(want)) << std::hex << h;
    }
  }
}

// 2^32 / 1021 fp32 bit patterns, an odd stride so every exponent and many mantissa endings occur.
TEST(DType, Fp32ToFp16RoundsLikeFloat16) {
  for (uint64_t u = 0; u < (uint64_t{1} << 32); u += 1021) {
    float f = bits_float(static_cast<uint32_t>(u));
    uint16_t got = float_to_fp16(f);
    if (std::isnan(f)) {
      ASSERT_TRUE(std::isnan(fp16_to_float(got))) << std::hex << u;
    } else {
      ASSERT_EQ(got, half_bits(static_cast<_Float16>(f))) << std::hex << u;
    }
  }
}

TEST(DType, Bf16RoundsToNearestEvenAndKeepsNan) {
  EXPECT_EQ(float_to_bf16(bits_float(0x3f808000u)), 0x3f80);  // tie, even below: down
  EXPECT_EQ(float_to_bf16(bits_float(0x3f818000u)), 0x3f82);  // tie, odd below: up
  EXPECT_EQ(float_to_bf16(bits_float(0x3f808001u)), 0x3f81);  // above the tie: up
  EXPECT_EQ(float_to_bf16(bits_float(0x7f7fffffu)), 0x7f80);  // max float rounds to infinity
  EXPECT_TRUE(std::isnan(
      bf16_to_float(float_to_bf16(bits_float(0x7f800001u)))));  // signalling NaN stays NaN
}

}  // namespace
}  // namespace dsx::kernels
