// bf16 x bf16 -> fp32 GEMM for CPU ranks in bf16 mode, through oneDNN's matmul primitive (its
// AVX512_BF16 and AMX kernels). OpenBLAS's cblas_sbgemm would be the other candidate, but Debian's
// OpenBLAS 0.3.21 declares it in cblas.h without exporting it from the library.
//
// Where the kernel cannot run fast (a build without oneDNN, a CPU without AVX512_BF16, or
// DSX_CPU_BF16_GEMM=off), gemm_bf16 widens the bf16 operands and runs the fp32 GEMM instead: the
// same exact products and fp32 sums, only slower. bf16_gemm_choice() says which and why.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace dsx::kernels::cpu {

struct Bf16GemmChoice {
  bool native;       // true: oneDNN's bf16 kernels run; false: the fp32 fallback does
  std::string note;  // one line for the run's notes, naming the reason
};

// Decided again on each call (the environment may change in tests); cheap beside a GEMM.
Bf16GemmChoice bf16_gemm_choice();

// C (m, n) = op(A) @ op(B) (+ C when accumulate), row-major, A and B bf16 bit patterns, C fp32.
// op transposes when trans_* is set, as in gemm() (kernels/cpu/gemm.h).
void gemm_bf16(bool trans_a, bool trans_b, size_t m, size_t n, size_t k, const uint16_t* a,
               size_t lda, const uint16_t* b, size_t ldb, bool accumulate, float* c, size_t ldc);

// fp32 -> bf16 (round to nearest even) over `count` elements, for operands cast once per step.
void to_bf16(uint16_t* out, const float* in, size_t count);

}  // namespace dsx::kernels::cpu
