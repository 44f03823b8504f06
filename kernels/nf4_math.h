// The element math of bitsandbytes' 4-bit NormalFloat (NF4) format, shared by the CPU loops
// (kernels/cpu/nf4.cpp) and the CUDA kernels, so the CPU tests check what a GPU would compute.
//
// Layout (bitsandbytes >= 0.47, the format transformers saves): the row-major flattened weight
// is cut into blocks of `blocksize` (64) elements; each block stores its absmax as fp32 and each
// element a 4-bit index into the 16 NF4 values; two indices share a byte, the element with the
// even flat index in the HIGH nibble. Dequantised: code[index] * absmax, in fp32, then rounded
// to the compute dtype. Not here: the blockwise loops and double quantisation (kernels/nf4.h).
#pragma once

#include <cstdint>

#include "kernels/dtype.h"

namespace dsx::kernels {

inline constexpr int kNf4Blocksize = 64;         // bitsandbytes' default 4-bit blocksize
inline constexpr int kNf4NestedBlocksize = 256;  // double quantisation's 8-bit blocksize

// The 16 NF4 values (bitsandbytes' get_4bit_type("nf4")): normal quantiles scaled to [-1, 1],
// 7 negative, an exact 0 at index 7, 8 positive.
// clang-format off
DSX_HD float nf4_value(unsigned index) {
  switch (index & 15u) {
    case 0: return -1.0f;
    case 1: return -0.6961928009986877f;
    case 2: return -0.5250730514526367f;
    case 3: return -0.39491748809814453f;
    case 4: return -0.28444138169288635f;
    case 5: return -0.18477343022823334f;
    case 6: return -0.09105003625154495f;
    case 7: return 0.0f;
    case 8: return 0.07958029955625534f;
    case 9: return 0.16093020141124725f;
    case 10: return 0.24611230194568634f;
    case 11: return 0.33791524171829224f;
    case 12: return 0.44070982933044434f;
    case 13: return 0.5626170039176941f;
    case 14: return 0.7229568362236023f;
    default: return 1.0f;
  }
}
// clang-format on

// The index of the NF4 value nearest to `scaled` (already in [-1, 1]): the count of midpoints
// strictly below it, so a value exactly on a midpoint takes the lower index, as bitsandbytes'
// bucketize and its CUDA decision tree do. The midpoints are fp32 sums halved, as bnb's are.
DSX_HD uint8_t nf4_index(float scaled) {
  unsigned index = 0;
  for (unsigned i = 0; i < 15; ++i) index += scaled > (nf4_value(i) + nf4_value(i + 1)) * 0.5f;
  return static_cast<uint8_t>(index);
}

// Two indices in one byte: the even element high, the odd one low.
DSX_HD uint8_t nf4_pack(uint8_t even, uint8_t odd) {
  return static_cast<uint8_t>((even << 4) | (odd & 15u));
}
DSX_HD uint8_t nf4_index_at(const uint8_t* packed, int64_t i) {
  uint8_t byte = packed[i >> 1];
  return (i & 1) ? (byte & 15u) : (byte >> 4);
}

// One weight element, dequantised in fp32 as bitsandbytes does (code * absmax).
DSX_HD float nf4_dequantize_element(const uint8_t* packed, int64_t i, float absmax) {
  return nf4_value(nf4_index_at(packed, i)) * absmax;
}

// A dequantised weight as the matmul uses it: rounded to the compute dtype, held in fp32.
DSX_HD float round_to_dtype(DType t, float v) {
  if (t == DType::BF16) return bf16_to_float(float_to_bf16(v));
  if (t == DType::F16) return fp16_to_float(float_to_fp16(v));
  return v;
}

// Block b's absmax under double quantisation: code[q[b]] * nested_absmax[b / nested_blocksize]
// + offset, the product rounded before the add as bitsandbytes does (callers build without FMA
// contraction).
DSX_HD float nf4_nested_absmax_element(const uint8_t* q, const float* nested_absmax,
                                       const float* code, float offset, int nested_blocksize,
                                       int64_t b) {
  float product = code[q[b]] * nested_absmax[b / nested_blocksize];
  return product + offset;
}

// bitsandbytes clamps the divisor at 1e-38 so an all-zero block maps to index 7 (the zero).
inline constexpr float kNf4MinAbsmax = 1e-38f;

// The 8-bit blockwise code of double quantisation: the index of the nearest of `code`'s 256
// sorted values, ties to the lower index (the published rule; bnb's CUDA kernel).
DSX_HD uint8_t code8_index(const float* code, float scaled) {
  unsigned lo = 0, hi = 255;  // invariant: code[lo] <= scaled < code[hi], or scaled at an end
  if (scaled <= code[0]) return 0;
  if (scaled >= code[255]) return 255;
  while (hi - lo > 1) {
    unsigned mid = (lo + hi) / 2;
    if (code[mid] <= scaled)
      lo = mid;
    else
      hi = mid;
  }
  return static_cast<uint8_t>(scaled - code[lo] <= code[hi] - scaled ? lo : hi);
}

}  // namespace dsx::kernels
