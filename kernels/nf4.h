// NF4 (bitsandbytes' 4-bit NormalFloat) over raw pointers: blockwise quantise and dequantise, the
// 8-bit blockwise code that double quantisation stores the absmax in, and the absmax of a block
// range with double quantisation resolved. Bit for bit bitsandbytes' quantize_4bit and
// dequantize_4bit (tests/kernels/test_nf4.cpp holds them to bnb's own outputs). The element math
// is kernels/nf4_math.h; the owning tensor and the matmul are kernels/nf4_tensor.h.
#pragma once

#include <array>
#include <cstdint>

#include "kernels/dtype.h"
#include "kernels/nf4_math.h"

namespace dsx::kernels {

inline int64_t nf4_blocks(int64_t n, int blocksize) { return (n + blocksize - 1) / blocksize; }
inline int64_t nf4_packed_bytes(int64_t n) { return (n + 1) / 2; }

// packed: nf4_packed_bytes(n) bytes; absmax: nf4_blocks(n, blocksize) floats; x: n elements of
// x_type. As bitsandbytes: absmax = max |x| of the block in fp32; full blocks are scaled by the
// fp32 reciprocal of absmax, a partial last block is divided by it (bnb's two code paths).
void nf4_quantize(uint8_t* packed, float* absmax, const void* x, DType x_type, int64_t n,
                  int blocksize);

// out: n elements of out_type, code * absmax in fp32 then rounded to nearest even.
void nf4_dequantize(void* out, DType out_type, const uint8_t* packed, const float* absmax,
                    int64_t n, int blocksize);

// The signed 8-bit "dynamic" code of bitsandbytes' create_dynamic_map(): 256 sorted values in
// [-0.993, 1], the code double quantisation uses by default.
std::array<float, 256> dynamic_code8();

// 8-bit blockwise quantisation with a sorted 256-value code: absmax per block, x / absmax, the
// nearest code value (ties to the lower index). q: n bytes; absmax: nf4_blocks(n, blocksize).
void code8_quantize(uint8_t* q, float* absmax, const float* x, int64_t n, int blocksize,
                    const float* code);

// The absmax of 4-bit blocks [first, first + count), resolving double quantisation:
// code[q[b]] * nested_absmax[b / nested_blocksize] + offset, in fp32 as bitsandbytes does.
void nf4_nested_absmax(float* absmax, const uint8_t* q, const float* nested_absmax,
                       const float* code, float offset, int nested_blocksize, int64_t first,
                       int64_t count);

}  // namespace dsx::kernels
