// OpenBLAS's kernels: forced to the CPU's best only where the library fell back to kernels older
// than AVX2 on a CPU that has it, and `dsx` runs on kernels as new as the CPU.
#include <gtest/gtest.h>

#include "kernels/cpu/blas_kernels.h"

using dsx::kernels::SimdLevel;
using dsx::kernels::cpu::blas_core_upgrade;

TEST(BlasKernels, FallbackCoresAreUpgradedToWhatTheCpuRuns) {
  EXPECT_EQ(blas_core_upgrade("Prescott", SimdLevel::Avx512, true), "Cooperlake");
  EXPECT_EQ(blas_core_upgrade("Prescott", SimdLevel::Avx512, false), "SkylakeX");
  EXPECT_EQ(blas_core_upgrade("prescott", SimdLevel::Avx2, false), "Haswell");
  EXPECT_EQ(blas_core_upgrade("Nehalem", SimdLevel::Avx2, false), "Haswell");
  EXPECT_EQ(blas_core_upgrade("Sandybridge", SimdLevel::Avx512, false), "SkylakeX");
}

TEST(BlasKernels, TheLibrarysChoiceStandsWhereItIsNotOlderThanAvx2OrTheCpuHasNoAvx2) {
  EXPECT_EQ(blas_core_upgrade("Haswell", SimdLevel::Avx512, true), "");  // OpenBLAS's own call
  EXPECT_EQ(blas_core_upgrade("SkylakeX", SimdLevel::Avx512, true), "");
  EXPECT_EQ(blas_core_upgrade("Cooperlake", SimdLevel::Avx512, true), "");
  EXPECT_EQ(blas_core_upgrade("Zen", SimdLevel::Avx2, false), "");
  EXPECT_EQ(blas_core_upgrade("Prescott", SimdLevel::Scalar, false), "");  // an old CPU's right kernels
  EXPECT_EQ(blas_core_upgrade("SomeFutureCore", SimdLevel::Avx512, true), "");
  EXPECT_EQ(blas_core_upgrade("", SimdLevel::Avx512, true), "");
}
