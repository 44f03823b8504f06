// Helpers of the kernel tests: random buffers with unaligned starts, every SIMD level the CPU
// has, and the tolerance checks against float64 references.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/dtype.h"
#include "kernels/simd.h"

namespace dsx::kernels::test {

// Lengths the issue asks for: empty, one, around a 16-float vector, and a large odd one whose
// tail is not a whole vector.
inline const std::vector<size_t>& test_lengths() {
  static const std::vector<size_t> lengths{0, 1, 15, 16, 17, 1000003};
  return lengths;
}

// A float buffer whose data() starts `offset` floats past a 64-byte boundary, so offset 1 makes
// every vector access unaligned.
class FloatBuffer {
 public:
  FloatBuffer(size_t count, size_t offset) : storage_(count + offset + 16), offset_(offset) {
    auto addr = reinterpret_cast<uintptr_t>(storage_.data());
    lead_ = ((64 - addr % 64) % 64) / sizeof(float);
  }
  float* data() { return storage_.data() + lead_ + offset_; }
  const float* data() const { return storage_.data() + lead_ + offset_; }
  float& operator[](size_t i) { return data()[i]; }
  float operator[](size_t i) const { return data()[i]; }

 private:
  std::vector<float> storage_;
  size_t offset_, lead_ = 0;
};

// How a test buffer is filled: N(mean, stddev), or |N(0, stddev)| for second-moment state.
struct BufferInit {
  float mean, stddev;
  bool non_negative;
};

inline void fill_normal(FloatBuffer& b, size_t count, float mean, float stddev, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(mean, stddev);
  for (size_t i = 0; i < count; ++i) b[i] = dist(rng);
}

inline void fill_abs_normal(FloatBuffer& b, size_t count, float stddev, uint32_t seed) {
  fill_normal(b, count, 0.0f, stddev, seed);
  for (size_t i = 0; i < count; ++i) b[i] = std::fabs(b[i]);
}

// Every SIMD level this CPU supports, lowest first.
inline std::vector<SimdLevel> supported_levels() {
  std::vector<SimdLevel> levels{SimdLevel::Scalar};
  if (detected_simd_level() >= SimdLevel::Avx2) levels.push_back(SimdLevel::Avx2);
  if (detected_simd_level() >= SimdLevel::Avx512) levels.push_back(SimdLevel::Avx512);
  return levels;
}

// Sets a SIMD level for the lifetime of the object, then restores the previous one.
class ScopedSimdLevel {
 public:
  explicit ScopedSimdLevel(SimdLevel level) : previous_(simd_level()) { set_simd_level(level); }
  ~ScopedSimdLevel() { set_simd_level(previous_); }

 private:
  SimdLevel previous_;
};

// fp32 results must lie within eight fp32 roundings of the magnitudes of the terms that made them.
inline constexpr double kFp32Tolerance = 8 * 0x1p-24;

// Relative precision of one rounding to dtype (half an ulp of the significand).
inline double unit_roundoff(DType t) {
  return t == DType::F32 ? 0x1p-24 : t == DType::F16 ? 0x1p-11 : 0x1p-8;
}

inline uint16_t round_to(DType t, float v) {
  return t == DType::F16 ? float_to_fp16(v) : float_to_bf16(v);
}

// Checks |got - want| <= rel * scale for all i, where scale is the magnitude of the terms that
// made want (so the bound is "rel roundings of what was added"); reports the first failure.
inline ::testing::AssertionResult near_all(const float* got, const std::vector<double>& want,
                                           const std::vector<double>& scale, double rel,
                                           const std::string& what) {
  for (size_t i = 0; i < want.size(); ++i) {
    double err = std::fabs(double(got[i]) - want[i]);
    bool both_nan = std::isnan(got[i]) && std::isnan(want[i]);
    if (!both_nan && !(err <= rel * scale[i]))
      return ::testing::AssertionFailure()
             << what << ": element " << i << " of " << want.size() << " is " << got[i]
             << ", float64 reference " << want[i] << " (error " << err << ", bound "
             << rel * scale[i] << ")";
  }
  return ::testing::AssertionSuccess();
}

inline ::testing::AssertionResult bitwise_equal(const void* a, const void* b, size_t bytes,
                                                const std::string& what) {
  if (bytes == 0 || std::memcmp(a, b, bytes) == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << what << " differs bitwise";
}

}  // namespace dsx::kernels::test
