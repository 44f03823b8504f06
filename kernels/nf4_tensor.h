// An NF4-quantised weight matrix in bitsandbytes' layout, and the linear layer that uses it as a
// frozen base weight (QLoRA): y = x W^T forward, dx = dy W backward, W dequantised one tile of
// rows at a time into a small buffer, never whole. This is the piece a LoRA layer plugs in as its
// base: it has no weight gradient, as bitsandbytes' MatMul4Bit has none.
//
// Numerics follow bitsandbytes' compute path: each weight is code * absmax in fp32, rounded to
// the compute dtype (bf16 by default), then the product accumulates in fp32.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "kernels/dtype.h"
#include "kernels/nf4.h"

namespace dsx::kernels {

// Double quantisation of the absmax (bnb's compress_statistics / bnb_4bit_use_double_quant):
// absmax - offset in the 8-bit code, blocks of 256, with offset = mean(absmax).
struct Nf4NestedAbsmax {
  std::vector<uint8_t> codes;  // one per 4-bit block ("weight.absmax" in a saved folder)
  std::vector<float> absmax;   // one per nested block ("weight.nested_absmax")
  std::vector<float> code;     // 256 values ("weight.nested_quant_map")
  float offset = 0.0f;         // "nested_offset"
  int blocksize = kNf4NestedBlocksize;
};

struct Nf4Options {
  int blocksize = kNf4Blocksize;
  bool double_quant = false;
  DType compute = DType::BF16;  // bnb_4bit_compute_dtype
};

struct Nf4Tensor {
  int64_t rows = 0, cols = 0;  // [out_features, in_features], as the stored shape
  int blocksize = kNf4Blocksize;
  DType compute = DType::BF16;
  std::vector<uint8_t> packed;  // nf4_packed_bytes(rows * cols)
  std::vector<float> absmax;    // one per block; empty when `nested` holds them
  std::optional<Nf4NestedAbsmax> nested;

  int64_t numel() const { return rows * cols; }
  int64_t blocks() const { return nf4_blocks(numel(), blocksize); }
  size_t storage_bytes() const;  // what the quantised weight occupies in memory
};

// Quantises a row-major [rows, cols] weight of dtype w_type.
Nf4Tensor nf4_quantize_matrix(const void* w, DType w_type, int64_t rows, int64_t cols,
                              const Nf4Options& options = {});

// The absmax of blocks [first, first + count), double quantisation resolved.
void nf4_absmax_range(float* absmax, const Nf4Tensor& w, int64_t first, int64_t count);

// Rows [row0, row0 + nrows) of W as fp32 holding compute-dtype values: out is nrows * cols.
void nf4_dequantize_rows(float* out, const Nf4Tensor& w, int64_t row0, int64_t nrows);

// The whole matrix dequantised into out_type, as bitsandbytes' dequantize_4bit (for export and
// tests; the linear layer below never does this).
void nf4_dequantize_matrix(void* out, DType out_type, const Nf4Tensor& w);

// How many rows of W one tile holds: about 1 MiB of fp32, at least one row.
int64_t nf4_tile_rows(const Nf4Tensor& w);

// y[tokens, rows] = x[tokens, cols] W^T.
void nf4_linear_forward(float* y, const float* x, const Nf4Tensor& w, int64_t tokens);

// dx[tokens, cols] (+)= dy[tokens, rows] W; accumulate adds to dx instead of overwriting it.
void nf4_linear_backward_input(float* dx, const float* dy, const Nf4Tensor& w, int64_t tokens,
                               bool accumulate);

}  // namespace dsx::kernels
