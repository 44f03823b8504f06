// The loop machinery of the CPU kernels (internal to kernels/cpu/): split [0, count) into one
// contiguous range per OpenMP thread, then run an element body over each range with the SIMD
// level in use. The body is one call of a shared element formula (kernels/*_math.h); the same
// source is compiled three times (AVX-512, AVX2, scalar) by GCC's target attribute and
// `omp simd`, so every path runs the same operations in the same order per element. Without FMA
// contraction (-ffp-contract=off) the three paths give bitwise identical element-wise results,
// which the tests check.
//
// Bodies must be lambdas marked DSX_ALWAYS_INLINE so they are compiled inside the target
// function, and everything they call must inline too (DSX_HD helpers do).
#pragma once

#include <omp.h>

#include <algorithm>
#include <cstddef>
#include <vector>

#include "kernels/simd.h"

#define DSX_ALWAYS_INLINE __attribute__((always_inline))

#if defined(__x86_64__)
#define DSX_TARGET_AVX512 \
  __attribute__((         \
      target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c,prefer-vector-width=512")))
#define DSX_TARGET_AVX2 __attribute__((target("avx2,fma,f16c")))
#else
#define DSX_TARGET_AVX512
#define DSX_TARGET_AVX2
#endif
// The scalar path is the reference the vector paths are checked against: keep it scalar.
#define DSX_TARGET_SCALAR __attribute__((optimize("no-tree-vectorize")))

namespace dsx::kernels::cpu {

// Below this many elements one thread does the whole range: waking threads costs more.
inline constexpr size_t kParallelMin = size_t{1} << 15;
// Thread ranges start at multiples of this many elements (16 floats: one 64-byte cache line),
// so threads never write the same line of a line-aligned buffer.
inline constexpr size_t kRangeAlign = 16;

// ---- one range, one SIMD level ----

template <class Body>
DSX_TARGET_AVX512 void simd_range_avx512(size_t begin, size_t end, const Body& body) {
  const Body local = body;  // a local closure: its captures stay in registers
#pragma omp simd
  for (size_t i = begin; i < end; ++i) local(i);
}

template <class Body>
DSX_TARGET_AVX2 void simd_range_avx2(size_t begin, size_t end, const Body& body) {
  const Body local = body;  // a local closure: its captures stay in registers
#pragma omp simd
  for (size_t i = begin; i < end; ++i) local(i);
}

template <class Body>
DSX_TARGET_SCALAR void simd_range_scalar(size_t begin, size_t end, const Body& body) {
  const Body local = body;
  for (size_t i = begin; i < end; ++i) local(i);
}

template <class Body>
void simd_range(SimdLevel level, size_t begin, size_t end, const Body& body) {
  switch (level) {
    case SimdLevel::Avx512:
      simd_range_avx512(begin, end, body);
      break;
    case SimdLevel::Avx2:
      simd_range_avx2(begin, end, body);
      break;
    default:
      simd_range_scalar(begin, end, body);
      break;
  }
}

// Sums body(i) (a double) over one range. The vector paths keep one partial sum per lane, so
// their order of additions differs from the scalar path's.
template <class Body>
DSX_TARGET_AVX512 double simd_sum_avx512(size_t begin, size_t end, const Body& body) {
  const Body local = body;
  double sum = 0.0;
#pragma omp simd reduction(+ : sum)
  for (size_t i = begin; i < end; ++i) sum += local(i);
  return sum;
}

template <class Body>
DSX_TARGET_AVX2 double simd_sum_avx2(size_t begin, size_t end, const Body& body) {
  const Body local = body;
  double sum = 0.0;
#pragma omp simd reduction(+ : sum)
  for (size_t i = begin; i < end; ++i) sum += local(i);
  return sum;
}

template <class Body>
DSX_TARGET_SCALAR double simd_sum_scalar(size_t begin, size_t end, const Body& body) {
  const Body local = body;
  double sum = 0.0;
  for (size_t i = begin; i < end; ++i) sum += local(i);
  return sum;
}

template <class Body>
double simd_sum(SimdLevel level, size_t begin, size_t end, const Body& body) {
  switch (level) {
    case SimdLevel::Avx512:
      return simd_sum_avx512(begin, end, body);
    case SimdLevel::Avx2:
      return simd_sum_avx2(begin, end, body);
    default:
      return simd_sum_scalar(begin, end, body);
  }
}

// Two sums at once (LAMB's sum(p^2) and sum(u^2) per tensor): body(i) returns a SumPair.
struct SumPair {
  double first = 0.0, second = 0.0;
};

template <class Body>
DSX_TARGET_AVX512 SumPair simd_sum_pair_avx512(size_t begin, size_t end, const Body& body) {
  const Body local = body;
  double a = 0.0, b = 0.0;
#pragma omp simd reduction(+ : a, b)
  for (size_t i = begin; i < end; ++i) {
    SumPair s = local(i);
    a += s.first;
    b += s.second;
  }
  return {a, b};
}

template <class Body>
DSX_TARGET_AVX2 SumPair simd_sum_pair_avx2(size_t begin, size_t end, const Body& body) {
  const Body local = body;
  double a = 0.0, b = 0.0;
#pragma omp simd reduction(+ : a, b)
  for (size_t i = begin; i < end; ++i) {
    SumPair s = local(i);
    a += s.first;
    b += s.second;
  }
  return {a, b};
}

template <class Body>
DSX_TARGET_SCALAR SumPair simd_sum_pair_scalar(size_t begin, size_t end, const Body& body) {
  const Body local = body;
  double a = 0.0, b = 0.0;
  for (size_t i = begin; i < end; ++i) {
    SumPair s = local(i);
    a += s.first;
    b += s.second;
  }
  return {a, b};
}

template <class Body>
SumPair simd_sum_pair(SimdLevel level, size_t begin, size_t end, const Body& body) {
  switch (level) {
    case SimdLevel::Avx512:
      return simd_sum_pair_avx512(begin, end, body);
    case SimdLevel::Avx2:
      return simd_sum_pair_avx2(begin, end, body);
    default:
      return simd_sum_pair_scalar(begin, end, body);
  }
}

// ---- [0, count) over the OpenMP threads ----

// Thread t's part of [0, count) when `threads` threads share it: contiguous, starting at a
// multiple of kRangeAlign; empty for trailing threads when count is small.
inline void thread_range(size_t count, size_t t, size_t threads, size_t& begin, size_t& end) {
  size_t per = (count + threads - 1) / threads;
  per = (per + kRangeAlign - 1) / kRangeAlign * kRangeAlign;
  begin = std::min(count, t * per);
  end = std::min(count, begin + per);
}

// Calls range(begin, end) once per non-empty thread range, on that thread. Returns the per-thread
// results of range (default-constructed for idle threads) in thread order.
template <class Result, class Range>
std::vector<Result> parallel_ranges(size_t count, const Range& range) {
  if (count < kParallelMin) return {count ? range(size_t{0}, count) : Result{}};
  std::vector<Result> results(static_cast<size_t>(omp_get_max_threads()));
#pragma omp parallel
  {
    size_t begin, end;
    size_t t = static_cast<size_t>(omp_get_thread_num());
    thread_range(count, t, static_cast<size_t>(omp_get_num_threads()), begin, end);
    if (begin < end) results[t] = range(begin, end);
  }
  return results;
}

// body(i) for every i < count, element-wise, on all threads with the current SIMD level.
template <class Body>
void for_each_element(size_t count, const Body& body) {
  SimdLevel level = simd_level();
  if (count < kParallelMin) {
    simd_range(level, 0, count, body);
    return;
  }
#pragma omp parallel
  {
    size_t begin, end;
    thread_range(count, static_cast<size_t>(omp_get_thread_num()),
                 static_cast<size_t>(omp_get_num_threads()), begin, end);
    if (begin < end) simd_range(level, begin, end, body);
  }
}

// The sum of body(i) (a double) over i < count: per-thread partial sums added in thread order,
// so a given thread count and SIMD level always give the same bits.
template <class Body>
double sum_elements(size_t count, const Body& body) {
  SimdLevel level = simd_level();
  double sum = 0.0;
  for (double part : parallel_ranges<double>(
           count, [&](size_t begin, size_t end) { return simd_sum(level, begin, end, body); }))
    sum += part;
  return sum;
}

// Both sums of body(i) (a SumPair) over i < count, deterministic as sum_elements.
template <class Body>
SumPair sum_pairs(size_t count, const Body& body) {
  SimdLevel level = simd_level();
  SumPair sum;
  for (const SumPair& part : parallel_ranges<SumPair>(count, [&](size_t begin, size_t end) {
         return simd_sum_pair(level, begin, end, body);
       })) {
    sum.first += part.first;
    sum.second += part.second;
  }
  return sum;
}

}  // namespace dsx::kernels::cpu
