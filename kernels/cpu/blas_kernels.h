// Which OpenBLAS kernels run. A DYNAMIC_ARCH OpenBLAS picks its kernels at load time from the CPU's
// model number; a CPU newer than the library (Debian 12's 0.3.21 on Emerald Rapids, say) gets its
// generic SSE3 "Prescott" kernels, three to four times slower than the AVX-512 ones the CPU can
// run. OPENBLAS_CORETYPE overrides the choice, but only when set before the library loads, so the
// fix is to set it and execute the program again.
#pragma once

#include <string>

#include "kernels/simd.h"

namespace dsx::kernels::cpu {

// The kernels OpenBLAS runs now, by its name for them ("Cooperlake", "Haswell", "Prescott", ...).
std::string blas_core_name();

// The OpenBLAS core to force for a CPU with `cpu`'s SIMD level when the library chose
// `chosen_core`, or "" to keep the library's choice: forced only when the chosen kernels are older
// than AVX2 on a CPU that has AVX2 and FMA (Cooperlake for AVX-512 with BF16, SkylakeX for
// AVX-512, Haswell for AVX2). A core name this does not know is kept.
std::string blas_core_upgrade(const std::string& chosen_core, SimdLevel cpu, bool cpu_has_avx512_bf16);

// blas_core_upgrade for this process's OpenBLAS and CPU; "" when OPENBLAS_CORETYPE is already set
// (the user's choice, or a second run of this program) or the library cannot switch kernels (not a
// DYNAMIC_ARCH build).
std::string blas_core_to_force();

// Executes this program again with OPENBLAS_CORETYPE set where blas_core_to_force() names a core.
// Call it first thing in main, before any thread or file is opened. Returns when there is nothing
// to do, or when the program cannot be executed again (it then runs on the library's choice).
void run_on_the_best_blas_kernels(char** argv);

}  // namespace dsx::kernels::cpu
