// The SIMD level: parsing, and lowering never raises above what the CPU has.
#include <gtest/gtest.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <string>

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

// Child mode for the test below: when DSX_SIMD_TEST_CHILD is set, this binary prints the level
// chosen at start-up and exits before GoogleTest runs.
const bool child_mode = [] {
  if (!std::getenv("DSX_SIMD_TEST_CHILD")) return false;
  std::printf("level=%s\n", simd_level_name(simd_level()));
  std::fflush(stdout);
  _exit(0);
}();

// Runs this test binary again with DSX_SIMD set; returns its stdout and stderr.
std::string child_output(const std::string& dsx_simd) {
  char self[4096] = {};
  if (readlink("/proc/self/exe", self, sizeof self - 1) <= 0) return "readlink failed";
  std::string cmd =
      "DSX_SIMD_TEST_CHILD=1 DSX_SIMD=" + dsx_simd + " '" + std::string(self) + "' 2>&1";
  std::string out;
  FILE* pipe = popen(cmd.c_str(), "r");
  if (!pipe) return out;
  std::array<char, 256> buf;
  while (fgets(buf.data(), buf.size(), pipe)) out += buf.data();
  pclose(pipe);
  return out;
}

TEST(SimdLevel, EnvLowersTheLevelAndABadValueIsIgnoredWithAMessage) {
  EXPECT_NE(child_output("scalar").find("level=scalar"), std::string::npos);
  std::string bad = child_output("sse9");
  EXPECT_NE(bad.find("DSX_SIMD='sse9' is not a SIMD level"), std::string::npos) << bad;
  EXPECT_NE(bad.find(std::string("level=") + simd_level_name(detected_simd_level())),
            std::string::npos)
      << bad;
}

}  // namespace
}  // namespace dsx::kernels
