// The SIMD level: parsing, and lowering never raises above what the CPU has.
#include <gtest/gtest.h>

#include "dsx/error.h"
#include "kernels/simd.h"

namespace dsx::kernels {
namespace {

TEST(SimdLevel, ParsesTheThreeNamesAndRejectsOthers) {
  EXPECT_EQ(parse_simd_level("avx512"), SimdLevel::Avx512);
  EXPECT_EQ(parse_simd_level("avx2"), SimdLevel::Avx2);
  EXPECT_EQ(parse_simd_level("scalar"), SimdLevel::Scalar);
  try {
    parse_simd_level("sse9");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Usage);
    EXPECT_NE(std::string(e.what()).find("avx512, avx2 or scalar"), std::string::npos) << e.what();
  }
}

TEST(SimdLevel, SetLowersButNeverRaisesAboveTheCpu) {
  SimdLevel before = simd_level();
  EXPECT_EQ(set_simd_level(SimdLevel::Scalar), SimdLevel::Scalar);
  EXPECT_EQ(simd_level(), SimdLevel::Scalar);
  EXPECT_EQ(set_simd_level(SimdLevel::Avx512), detected_simd_level());
  set_simd_level(before);
}

}  // namespace
}  // namespace dsx::kernels
