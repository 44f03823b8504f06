// What nvcc gives device code, for the host compiler: the synchronisation and warp intrinsics
// (onto block_runner.h's fibers), atomics (onto std::atomic_ref, since two streams' kernels run
// at once), the math intrinsics dsx's kernels use, shared memory with a race check, and the
// launch helper that stands in for <<<...>>>.
#pragma once

#include <atomic>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <tuple>
#include <type_traits>

#include "tests/emulated_gpu/block_runner.h"
#include "tests/emulated_gpu/kernel_launch.h"
#include "tests/emulated_gpu/shared_memory.h"

// ---- barriers and warps ----
inline void __syncthreads() { ::dsx::emu::sync_threads(); }
inline void __syncwarp(unsigned mask = 0xffffffffu) {
  ::dsx::emu::warp_exchange(::dsx::emu::WarpOp::Sync, mask, 0, 0, "__syncwarp");
}
inline void __threadfence() { std::atomic_thread_fence(std::memory_order_seq_cst); }
inline void __threadfence_block() { std::atomic_thread_fence(std::memory_order_seq_cst); }

namespace dsx::emu {
template <class T>
uint64_t to_bits(T v) {
  static_assert(sizeof(T) <= 8 && std::is_trivially_copyable_v<T>, "shuffles move 1-8 bytes");
  uint64_t bits = 0;
  std::memcpy(&bits, &v, sizeof(T));
  return bits;
}
template <class T>
T from_bits(uint64_t bits) {
  T v;
  std::memcpy(&v, &bits, sizeof(T));
  return v;
}
// A shuffle's source lane as CUDA defines it for width-lane sub-groups; a source outside the
// caller's sub-group (up/down past its edge, xor into a later one) is the caller itself.
enum class ShuffleKind { Index, Up, Down, Xor };
unsigned shuffle_source(ShuffleKind kind, unsigned lane, int arg, int width);
template <class T>
T shuffle(ShuffleKind kind, unsigned mask, T v, int arg, int width, const char* site) {
  const unsigned lane = this_thread().linear % 32;
  const unsigned src = shuffle_source(kind, lane, arg, width);
  return from_bits<T>(warp_exchange(WarpOp::Shuffle, mask, to_bits(v), src, site));
}
}  // namespace dsx::emu

template <class T>
T __shfl_sync(unsigned mask, T v, int src, int width = 32) {
  return ::dsx::emu::shuffle(::dsx::emu::ShuffleKind::Index, mask, v, src, width, "__shfl_sync");
}
template <class T>
T __shfl_up_sync(unsigned mask, T v, unsigned delta, int width = 32) {
  return ::dsx::emu::shuffle(::dsx::emu::ShuffleKind::Up, mask, v, int(delta), width,
                             "__shfl_up_sync");
}
template <class T>
T __shfl_down_sync(unsigned mask, T v, unsigned delta, int width = 32) {
  return ::dsx::emu::shuffle(::dsx::emu::ShuffleKind::Down, mask, v, int(delta), width,
                             "__shfl_down_sync");
}
template <class T>
T __shfl_xor_sync(unsigned mask, T v, int lane_mask, int width = 32) {
  return ::dsx::emu::shuffle(::dsx::emu::ShuffleKind::Xor, mask, v, lane_mask, width,
                             "__shfl_xor_sync");
}
inline unsigned __ballot_sync(unsigned mask, int predicate) {
  return unsigned(::dsx::emu::warp_exchange(::dsx::emu::WarpOp::Ballot, mask, predicate != 0, 0,
                                            "__ballot_sync"));
}
inline int __any_sync(unsigned mask, int predicate) { return __ballot_sync(mask, predicate) != 0; }
inline int __all_sync(unsigned mask, int predicate) {
  return __ballot_sync(mask, predicate) == mask;
}

// ---- atomics (on global or shared memory; they order nothing else, as on the GPU) ----
template <class T>
T __dsx_atomic_add(T* address, T value) {
  return std::atomic_ref<T>(*address).fetch_add(value, std::memory_order_relaxed);
}
inline float atomicAdd(float* a, float v) { return __dsx_atomic_add(a, v); }
inline double atomicAdd(double* a, double v) { return __dsx_atomic_add(a, v); }
inline int atomicAdd(int* a, int v) { return __dsx_atomic_add(a, v); }
inline unsigned atomicAdd(unsigned* a, unsigned v) { return __dsx_atomic_add(a, v); }
inline unsigned long long atomicAdd(unsigned long long* a, unsigned long long v) {
  return __dsx_atomic_add(a, v);
}
template <class T>
T atomicExch(T* a, T v) {
  return std::atomic_ref<T>(*a).exchange(v, std::memory_order_relaxed);
}
template <class T>
T atomicCAS(T* a, T expected, T desired) {
  std::atomic_ref<T>(*a).compare_exchange_strong(expected, desired, std::memory_order_relaxed);
  return expected;
}
template <class T>
T atomicMax(T* a, T v) {
  std::atomic_ref<T> r(*a);
  T old = r.load(std::memory_order_relaxed);
  while (old < v && !r.compare_exchange_weak(old, v, std::memory_order_relaxed)) {
  }
  return old;
}
template <class T>
T atomicMin(T* a, T v) {
  std::atomic_ref<T> r(*a);
  T old = r.load(std::memory_order_relaxed);
  while (v < old && !r.compare_exchange_weak(old, v, std::memory_order_relaxed)) {
  }
  return old;
}

// ---- math and bit intrinsics (the GPU's fast versions are at least this exact) ----
inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }
inline double rsqrt(double x) { return 1.0 / std::sqrt(x); }
inline float __expf(float x) { return std::exp(x); }
inline float __logf(float x) { return std::log(x); }
inline float __fdividef(float a, float b) { return a / b; }
inline float __saturatef(float x) { return x < 0.0f ? 0.0f : (x > 1.0f ? 1.0f : x); }
inline unsigned __float_as_uint(float x) { return std::bit_cast<unsigned>(x); }
inline float __uint_as_float(unsigned x) { return std::bit_cast<float>(x); }
inline int __float_as_int(float x) { return std::bit_cast<int>(x); }
inline float __int_as_float(int x) { return std::bit_cast<float>(x); }
template <class T>
T __ldg(const T* p) {
  return *p;
}
