// Row-major GEMM over the OpenMP threads with a single-threaded BLAS per slice (see gemm.h).
#include "kernels/cpu/gemm.h"

#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <type_traits>

namespace dsx::kernels::cpu {
namespace {

// Slices start at multiples of this many rows or columns (16 floats: one cache line).
constexpr size_t kSliceAlign = 16;
// A split product has up to this many parts per thread, each at least kMinPartWidth wide: enough
// to rebalance around a descheduled thread, few enough that OpenBLAS's packing of the shared
// operand (once per part) stays small beside the multiply.
constexpr int kPartsPerThread = 4;
constexpr size_t kMinPartWidth = 64;

// One row-major BLAS call: cblas_sgemm for float, cblas_dgemm for double.
template <class T>
void blas_gemm(bool trans_a, bool trans_b, size_t m, size_t n, size_t k, T alpha, const T* a,
               size_t lda, const T* b, size_t ldb, T beta, T* c, size_t ldc) {
  constexpr auto gemm = [] {
    if constexpr (std::is_same_v<T, float>) return cblas_sgemm;
    else return cblas_dgemm;
  }();
  auto op = [](bool trans) { return trans ? CblasTrans : CblasNoTrans; };
  auto i = [](size_t v) { return static_cast<int>(v); };
  gemm(CblasRowMajor, op(trans_a), op(trans_b), i(m), i(n), i(k), alpha, a, i(lda), b, i(ldb), beta, c, i(ldc));
}

}  // namespace

int blas_threads() { return openblas_get_parallel() == 1 ? openblas_get_num_threads() : 1; }

SingleThreadedBlas::SingleThreadedBlas() : saved_threads_(1) {
  saved_threads_ = blas_threads();
  if (saved_threads_ != 1) openblas_set_num_threads(1);
}

SingleThreadedBlas::~SingleThreadedBlas() {
  if (saved_threads_ != 1) openblas_set_num_threads(saved_threads_);
}

template <class T>
void gemm_serial(bool trans_a, bool trans_b, size_t m, size_t n, size_t k, T alpha, const T* a,
                 size_t lda, const T* b, size_t ldb, T beta, T* c, size_t ldc) {
  if (m == 0 || n == 0) return;
  if (!omp_in_parallel()) {
    // A product dsx chose not to split (too small to pay for threads): OpenBLAS's pthread build
    // would still split anything over 2^18 multiply-adds over its own spinning threads, which
    // costs a tiny model more than it gains (byte-tiny trains 2-3x slower that way).
    SingleThreadedBlas single;
    blas_gemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    return;
  }
  blas_gemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

bool gemm_is_split(size_t m, size_t n, size_t k) {
  return !omp_in_parallel() && omp_get_max_threads() > 1 && m * n * k >= kGemmParallelMacs;
}

int gemm_parts(size_t m, size_t n, int threads) {
  const size_t longest = std::max(m, n);
  size_t parts = std::min<size_t>(size_t(kPartsPerThread) * threads, longest / kMinPartWidth);
  return static_cast<int>(std::max<size_t>(parts, 1));
}

// The longer side of C is cut: rows of C are rows of op(A), columns of C are columns of op(B).
GemmSlice gemm_slice(size_t m, size_t n, int part, int parts) {
  const bool by_rows = m >= n;
  const size_t extent = by_rows ? m : n;
  size_t per = (extent + parts - 1) / parts;
  per = (per + kSliceAlign - 1) / kSliceAlign * kSliceAlign;
  const size_t begin = std::min(extent, static_cast<size_t>(part) * per);
  return {by_rows, begin, std::min(extent, begin + per)};
}

template <class T>
void gemm_part(const GemmSlice& s, bool trans_a, bool trans_b, size_t m, size_t n, size_t k,
               T alpha, const T* a, size_t lda, const T* b, size_t ldb, T beta, T* c, size_t ldc) {
  if (s.begin >= s.end) return;
  const size_t width = s.end - s.begin;
  if (s.by_rows) {
    const T* a_part = trans_a ? a + s.begin : a + s.begin * lda;
    gemm_serial(trans_a, trans_b, width, n, k, alpha, a_part, lda, b, ldb, beta, c + s.begin * ldc,
                ldc);
  } else {
    const T* b_part = trans_b ? b + s.begin * ldb : b + s.begin;
    gemm_serial(trans_a, trans_b, m, width, k, alpha, a, lda, b_part, ldb, beta, c + s.begin, ldc);
  }
}

template <class T>
void gemm(bool trans_a, bool trans_b, size_t m, size_t n, size_t k, T alpha, const T* a, size_t lda,
          const T* b, size_t ldb, T beta, T* c, size_t ldc) {
  if (!gemm_is_split(m, n, k)) {
    gemm_serial(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    return;
  }
  SingleThreadedBlas single;
#pragma omp parallel
  {
    const int parts = gemm_parts(m, n, omp_get_num_threads());
#pragma omp for schedule(dynamic, 1)
    for (int part = 0; part < parts; ++part)
      gemm_part(gemm_slice(m, n, part, parts), trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb,
                beta, c, ldc);
  }
}

// OpenBLAS's build line, which names the kernels it picked at load time for this CPU (or the ones
// OPENBLAS_CORETYPE forced).
const char* blas_description() {
  const char* config = openblas_get_config();
  return config ? config : "OpenBLAS";
}

#define DSX_GEMM_INSTANTIATE(T)                                                                    \
  template void gemm<T>(bool, bool, size_t, size_t, size_t, T, const T*, size_t, const T*, size_t, \
                        T, T*, size_t);                                                            \
  template void gemm_serial<T>(bool, bool, size_t, size_t, size_t, T, const T*, size_t, const T*,  \
                               size_t, T, T*, size_t);                                             \
  template void gemm_part<T>(const GemmSlice&, bool, bool, size_t, size_t, size_t, T, const T*,    \
                             size_t, const T*, size_t, T, T*, size_t);

DSX_GEMM_INSTANTIATE(float)
DSX_GEMM_INSTANTIATE(double)

}  // namespace dsx::kernels::cpu
