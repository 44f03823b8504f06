// Row-major GEMM for the CPU kernels, threaded by OpenMP rather than by the BLAS library.
//
// Why: OpenBLAS's pthread build keeps its own worker threads. Beside the OpenMP threads of the
// other layer loops, two pools then spin for the same cores between calls (measured: a quarter of
// a GPT-2 step's CPU time went to libgomp spinning while OpenBLAS computed). Here the BLAS runs
// single-threaded on each OpenMP thread's slice of the output, so one pool does all the work.
// Callers already inside a parallel region (one attention head per thread) use gemm_serial.
#pragma once

#include <cstddef>

namespace dsx::kernels::cpu {

// C (m, n) = alpha * op(A) @ op(B) + beta * C, all row-major; op transposes when trans_* is set.
// Large products are split across the OpenMP threads (rows or columns of C, whichever is longer).
template <class T>
void gemm(bool trans_a, bool trans_b, size_t m, size_t n, size_t k, T alpha, const T* a, size_t lda,
          const T* b, size_t ldb, T beta, T* c, size_t ldc);

// gemm() splits C when it has at least this many multiply-adds and more than one thread.
inline constexpr size_t kGemmParallelMacs = size_t{1} << 22;
bool gemm_is_split(size_t m, size_t n, size_t k);

// A split product cuts C (m, n) along its longer side into gemm_parts() parts, several per thread,
// which the threads take in dynamic order: on a shared machine, a thread the scheduler puts aside
// leaves its remaining parts to the others instead of making them wait at the barrier. The cut
// depends on the sizes and thread count only, so results do not depend on which thread ran what.
int gemm_parts(size_t m, size_t n, int threads);

// Part `part` of `parts`: rows [begin, end) of C when by_rows, else columns [begin, end).
struct GemmSlice {
  bool by_rows;
  size_t begin, end;
};
GemmSlice gemm_slice(size_t m, size_t n, int part, int parts);

// One part of gemm(), for layers that run several products (or a product and the loop that
// prepares its output) in one parallel region, without a barrier between them. Same condition as
// gemm_serial: the region runs while a SingleThreadedBlas is alive.
template <class T>
void gemm_part(const GemmSlice& slice, bool trans_a, bool trans_b, size_t m, size_t n, size_t k,
               T alpha, const T* a, size_t lda, const T* b, size_t ldb, T beta, T* c, size_t ldc);

// The same on the calling thread only, for one thread's share of a parallel region. The region
// must run while a SingleThreadedBlas is alive, or OpenBLAS's pthread build would share its own
// threads between the callers.
template <class T>
void gemm_serial(bool trans_a, bool trans_b, size_t m, size_t n, size_t k, T alpha, const T* a,
                 size_t lda, const T* b, size_t ldb, T beta, T* c, size_t ldc);

// The BLAS library's own thread count now (1 for a library without threads).
int blas_threads();

// While alive, the BLAS library's own threads stay idle: each call runs on its calling thread.
// An OpenMP build of OpenBLAS does this by itself inside a parallel region; the pthread build
// needs its thread count lowered (and restored afterwards, for other callers in the process).
// Create it outside parallel regions.
class SingleThreadedBlas {
 public:
  SingleThreadedBlas();
  ~SingleThreadedBlas();
  SingleThreadedBlas(const SingleThreadedBlas&) = delete;
  SingleThreadedBlas& operator=(const SingleThreadedBlas&) = delete;

 private:
  int saved_threads_;
};

// The BLAS library's version and kernel set (e.g. "OpenBLAS 0.3.21 ... Cooperlake ..."), for
// benchmark tables.
const char* blas_description();

}  // namespace dsx::kernels::cpu
