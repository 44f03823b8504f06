// Forcing OpenBLAS's kernels where its own choice fell back to old ones (see blas_kernels.h).
#include "kernels/cpu/blas_kernels.h"

#include <cblas.h>
#include <strings.h>
#include <unistd.h>

#include <array>
#include <cstdlib>
#include <cstring>

namespace dsx::kernels::cpu {
namespace {

// OpenBLAS's x86-64 cores whose kernels stop short of AVX2 (Prescott is its fallback for a CPU it
// does not know).
constexpr std::array kPreAvx2Cores = {"Prescott",  "Core2",    "Penryn",    "Dunnington", "Nehalem",
                                      "Atom",      "Sandybridge", "Opteron", "Opteron_SSE3",
                                      "Barcelona", "Bobcat",   "Bulldozer", "Piledriver", "Steamroller",
                                      "Excavator"};

bool is_pre_avx2_core(const std::string& core) {
  for (const char* name : kPreAvx2Cores)
    if (strcasecmp(core.c_str(), name) == 0) return true;
  return false;
}

bool cpu_has_avx512_bf16() {
#if defined(__x86_64__)
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512bf16");
#else
  return false;
#endif
}

}  // namespace

std::string blas_core_name() {
  const char* core = openblas_get_corename();
  return core ? core : "";
}

std::string blas_core_upgrade(const std::string& chosen_core, SimdLevel cpu, bool avx512_bf16) {
  if (!is_pre_avx2_core(chosen_core)) return "";
  switch (cpu) {
    case SimdLevel::Avx512: return avx512_bf16 ? "Cooperlake" : "SkylakeX";
    case SimdLevel::Avx2: return "Haswell";
    default: return "";
  }
}

std::string blas_core_to_force() {
  const char* forced = std::getenv("OPENBLAS_CORETYPE");
  if (forced && *forced) return "";
  const char* config = openblas_get_config();
  if (!config || !std::strstr(config, "DYNAMIC_ARCH")) return "";
  return blas_core_upgrade(blas_core_name(), detected_simd_level(), cpu_has_avx512_bf16());
}

void run_on_the_best_blas_kernels(char** argv) {
  const std::string core = blas_core_to_force();
  if (core.empty()) return;
  ::setenv("OPENBLAS_CORETYPE", core.c_str(), 1);
  ::execv("/proc/self/exe", argv);
  // Not executable again (no /proc, say): the library's own kernels, slower but correct.
}

}  // namespace dsx::kernels::cpu
