// Which SIMD instruction set the CPU kernels use. Chosen once from what the CPU supports; may be
// lowered (never raised above what the CPU has) by the environment variable DSX_SIMD
// (avx512 | avx2 | scalar; another value is reported on stderr and ignored) or by
// set_simd_level(), which the tests use to check every path.
#pragma once

#include <cstdint>
#include <string>

namespace dsx::kernels {

enum class SimdLevel : uint8_t { Scalar, Avx2, Avx512 };

const char* simd_level_name(SimdLevel level);

// The best level this CPU supports (Scalar where the build is not x86-64).
SimdLevel detected_simd_level();

// The level in use: the detected one, lowered by DSX_SIMD or set_simd_level().
SimdLevel simd_level();

// Use `level`, or the detected level where the CPU lacks `level`. Returns the level now in use.
// A process-wide setting: call it before starting threads that run kernels.
SimdLevel set_simd_level(SimdLevel level);

// Parses "avx512", "avx2" or "scalar"; throws dsx::Error(Usage) naming the accepted values.
SimdLevel parse_simd_level(const std::string& name);

}  // namespace dsx::kernels
