// Element types of dsx buffers and the conversions between them. Used by the CPU loops and the
// CUDA kernels alike (DSX_HD), so both round the same way: fp32 -> fp16/bf16 rounds to nearest
// even, NaN stays NaN, overflow goes to infinity.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define DSX_HD __host__ __device__ __forceinline__
#elif defined(__GNUC__)
// Always inlined so the CPU SIMD loops (kernels/cpu/loops.h) compile it for their own ISA.
#define DSX_HD inline __attribute__((always_inline))
#else
#define DSX_HD inline
#endif

namespace dsx::kernels {

enum class DType : uint8_t { F32, F16, BF16 };

inline constexpr size_t dtype_size(DType t) { return t == DType::F32 ? 4 : 2; }
inline constexpr const char* dtype_name(DType t) {
  return t == DType::F32 ? "fp32" : t == DType::F16 ? "fp16" : "bf16";
}

DSX_HD uint32_t float_bits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
#endif
}

DSX_HD float bits_float(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, 4);
  return f;
#endif
}

// bfloat16: the top 16 bits of an fp32, rounded to nearest even.
DSX_HD uint16_t float_to_bf16(float f) {
  uint32_t u = float_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40);  // quiet NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

DSX_HD float bf16_to_float(uint16_t h) { return bits_float(static_cast<uint32_t>(h) << 16); }

// IEEE half: 1 sign, 5 exponent, 10 mantissa bits; subnormals kept, round to nearest even.
DSX_HD uint16_t float_to_fp16(float f) {
  uint32_t u = float_bits(f);
  uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return sign | 0x7e00u;            // NaN
  if (a >= 0x477ff000u) return sign | 0x7c00u;           // rounds to >= 65520: infinity
  if (a < 0x38800000u) {                                 // below 2^-14: subnormal or zero
    if (a < 0x33000000u) return sign;                    // below half the smallest subnormal
    uint32_t mant = (a & 0x7fffffu) | 0x800000u;
    int shift = 126 - static_cast<int>(a >> 23);         // bits dropped: value / 2^-24 = mant >> shift
    uint32_t drop = static_cast<uint32_t>(shift);
    uint32_t half_ulp = 1u << (drop - 1);
    uint32_t rest = mant & ((1u << drop) - 1);
    uint32_t q = mant >> drop;
    if (rest > half_ulp || (rest == half_ulp && (q & 1u))) ++q;
    return sign | static_cast<uint16_t>(q);
  }
  uint32_t r = a - 0x38000000u;                          // rebias exponent 127 -> 15
  r += 0xfffu + ((r >> 13) & 1u);
  return sign | static_cast<uint16_t>(r >> 13);
}

// Written with selects instead of early returns so that the CPU loops vectorise it.
DSX_HD float fp16_to_float(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  float normal = bits_float(sign | ((exp + 112u) << 23) | (mant << 13));
  float inf_nan = bits_float(sign | 0x7f800000u | (mant << 13));
  float subnormal = static_cast<float>(mant) * 5.9604644775390625e-8f;  // mant * 2^-24, or zero
  subnormal = sign ? -subnormal : subnormal;
  return exp == 0x1f ? inf_nan : (exp == 0 ? subnormal : normal);
}

// Element i of a buffer of dtype T, as fp32, with the dtype known at compile time (the loops
// pick the instantiation once per call; see dispatch_dtype).
template <DType T>
DSX_HD float load_element(const void* p, size_t i) {
  if constexpr (T == DType::F32) return static_cast<const float*>(p)[i];
  else if constexpr (T == DType::F16) return fp16_to_float(static_cast<const uint16_t*>(p)[i]);
  else return bf16_to_float(static_cast<const uint16_t*>(p)[i]);
}

template <DType T>
DSX_HD void store_element(void* p, size_t i, float v) {
  if constexpr (T == DType::F32) static_cast<float*>(p)[i] = v;
  else if constexpr (T == DType::F16) static_cast<uint16_t*>(p)[i] = float_to_fp16(v);
  else static_cast<uint16_t*>(p)[i] = float_to_bf16(v);
}

template <DType T>
struct DTypeTag {
  static constexpr DType value = T;
};

// Calls f(DTypeTag<t>{}) so that f can use t as a compile-time constant.
template <class F>
decltype(auto) dispatch_dtype(DType t, F&& f) {
  switch (t) {
    case DType::F32: return f(DTypeTag<DType::F32>{});
    case DType::F16: return f(DTypeTag<DType::F16>{});
    default: return f(DTypeTag<DType::BF16>{});
  }
}

// Load element i of a buffer of type T as fp32, and store an fp32 as element i.
DSX_HD float load_as_float(DType t, const void* p, size_t i) {
  switch (t) {
    case DType::F32: return static_cast<const float*>(p)[i];
    case DType::F16: return fp16_to_float(static_cast<const uint16_t*>(p)[i]);
    default: return bf16_to_float(static_cast<const uint16_t*>(p)[i]);
  }
}

DSX_HD void store_from_float(DType t, void* p, size_t i, float v) {
  switch (t) {
    case DType::F32: static_cast<float*>(p)[i] = v; break;
    case DType::F16: static_cast<uint16_t*>(p)[i] = float_to_fp16(v); break;
    default: static_cast<uint16_t*>(p)[i] = float_to_bf16(v); break;
  }
}

}  // namespace dsx::kernels
