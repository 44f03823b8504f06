// CPU feature detection and the process-wide SIMD level (kernels/simd.h).
#include "kernels/simd.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>

#include "dsx/error.h"

namespace dsx::kernels {
namespace {

SimdLevel detect() {
#if defined(__x86_64__)
  __builtin_cpu_init();
  // The AVX-512 loops also use the AVX2/FMA/F16C subsets, and BW/VL/DQ for 16-bit and masks.
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
      __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    return SimdLevel::Avx512;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return SimdLevel::Avx2;
#endif
  return SimdLevel::Scalar;
}

SimdLevel lower(SimdLevel a, SimdLevel b) { return a < b ? a : b; }

// DSX_SIMD lowers the level. A bad value must not stop a training run from inside a kernel:
// it is reported once on stderr and ignored.
SimdLevel initial_level() {
  SimdLevel level = detect();
  const char* env = std::getenv("DSX_SIMD");
  if (!env || !*env) return level;
  try {
    return lower(level, parse_simd_level(env));
  } catch (const Error& e) {
    std::fprintf(stderr, "dsx: %s; ignoring it and using %s\n", e.what(), simd_level_name(level));
    return level;
  }
}

std::atomic<SimdLevel>& current() {
  static std::atomic<SimdLevel> level{initial_level()};
  return level;
}

}  // namespace

const char* simd_level_name(SimdLevel level) {
  switch (level) {
    case SimdLevel::Avx512: return "avx512";
    case SimdLevel::Avx2: return "avx2";
    default:
      return "scalar";
  }
}

SimdLevel detected_simd_level() {
  static const SimdLevel level = detect();
  return level;
}

SimdLevel simd_level() { return current().load(std::memory_order_relaxed); }

SimdLevel set_simd_level(SimdLevel level) {
  SimdLevel used = lower(level, detected_simd_level());
  current().store(used, std::memory_order_relaxed);
  return used;
}

SimdLevel parse_simd_level(const std::string& name) {
  if (name == "avx512") return SimdLevel::Avx512;
  if (name == "avx2") return SimdLevel::Avx2;
  if (name == "scalar") return SimdLevel::Scalar;
  throw Error(ErrorKind::Usage,
              "DSX_SIMD='" + name + "' is not a SIMD level; use avx512, avx2 or scalar");
}

}  // namespace dsx::kernels
