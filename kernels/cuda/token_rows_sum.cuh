// The gradient of an embedding table on the GPU (internal): GPT-2's wte and the Llama family's
// embed_tokens. dtable[token, :] += the rows of dout holding that token, added in ascending row
// order (kernels/token_rows.h) - a fixed order, so no atomics and the same bits every run.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "kernels/cuda/storage_types.cuh"
#include "kernels/cuda/launch.cuh"

namespace dsx::kernels::cuda {

// Distinct token u's column c: its rows of dout added in their order, then to the table's row.
template <class T>
__device__ void add_rows_of_token(T* dtable, const T* dout, const int32_t* tokens, const int32_t* offsets,
                                  const int32_t* rows, int u, int c, int C) {
  float s = 0.0f;
  for (int32_t k = offsets[u]; k < offsets[u + 1]; ++k) s += to_f(dout[size_t(rows[k]) * C + c]);
  T* g = dtable + size_t(tokens[u]) * C + c;
  *g = from_f<T>(to_f(*g) + s);
}

// Over rows grouped on the GPU (batch_tokens.h), whose number of distinct tokens is read there:
// one block row per distinct token u; each thread owns a column and adds the token's rows.
template <class T>
__global__ void grouped_rows_sum_kernel(T* dtable, const T* dout, const int32_t* grouped, int C) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= C) return;
  const int distinct = grouped[0];
  const int32_t* offsets = grouped + 1 + distinct;
  for (int u = blockIdx.y; u < distinct; u += gridDim.y)
    add_rows_of_token(dtable, dout, grouped + 1, offsets, offsets + distinct + 1, u, c, C);
}

// grouped: rows grouped on the GPU (kernels/cuda/batch_tokens.h) for `n` tokens; the grid is
// sized for n distinct tokens, and blocks past the real number end at once. The caller checks the
// launch. Its reads and writes (rows chosen by the tokens) are not declared to the emulated GPU's
// stream-order check.
template <class T>
void add_grouped_rows(T* dtable, const T* dout, const int32_t* grouped, size_t n, int C, cudaStream_t stream) {
  if (n == 0) return;
  const unsigned column_blocks = static_cast<unsigned>((C + kBlock - 1) / kBlock);
  const unsigned token_blocks = static_cast<unsigned>(n < 65535 ? n : 65535);
  DSX_LAUNCH(dim3(column_blocks, token_blocks), kBlock, 0, stream, grouped_rows_sum_kernel)(dtable, dout, grouped, C);
}

}  // namespace dsx::kernels::cuda
