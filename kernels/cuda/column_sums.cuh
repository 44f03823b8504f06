// Deterministic column sums on the GPU (internal; the row cut is kernels/column_sums.h):
// add_column_sums(out, term, N, C, scratch) does out[c] += sum over rows r of term(r, c), in fp32,
// in the same order every run. Stage 1: block (x: 256 columns, y: a chunk of rows), each thread
// walks its column down the chunk (consecutive threads read consecutive columns) and writes the
// chunk's sum to scratch. Stage 2: one thread per column adds the chunks' sums in chunk order.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

#include "kernels/column_sums.h"
#include "kernels/cuda/storage_types.cuh"
#include "kernels/cuda/launch.cuh"

namespace dsx::kernels::cuda {

template <class Term>
__global__ void column_chunk_sums_kernel(float* partial, Term term, size_t N, int C, size_t rows_per_chunk) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= C) return;
  const size_t begin = size_t(blockIdx.y) * rows_per_chunk;
  const size_t end = begin + rows_per_chunk < N ? begin + rows_per_chunk : N;
  float s = 0.0f;
  for (size_t r = begin; r < end; ++r) s += term(r, c);
  partial[size_t(blockIdx.y) * C + c] = s;
}

template <class T>
__global__ void add_chunk_sums_kernel(T* out, const float* partial, unsigned chunks, int C) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= C) return;
  float s = 0.0f;
  for (unsigned k = 0; k < chunks; ++k) s += partial[size_t(k) * C + c];
  out[c] = from_f<T>(to_f(out[c]) + s);
}

// scratch: column_sums_scratch_floats(N, C) floats of device memory.
template <class T, class Term>
void add_column_sums(T* out, const Term& term, size_t N, int C, float* scratch, cudaStream_t stream,
                     const char* name) {
  const RowChunks cut = row_chunks(N);
  if (cut.chunks == 0 || C <= 0) return;
  const unsigned column_blocks = static_cast<unsigned>((C + kBlock - 1) / kBlock);
  // The term's reads are the caller's to declare (DSX_TOUCHES before this call).
  DSX_TOUCHES(DSX_WRITES(scratch, size_t(cut.chunks) * C * 4));
  DSX_LAUNCH(dim3(column_blocks, cut.chunks), kBlock, 0, stream, column_chunk_sums_kernel)(scratch, term, N, C,
                                                                                   cut.rows_per_chunk);
  DSX_TOUCHES(DSX_READS(scratch, size_t(cut.chunks) * C * 4), DSX_WRITES(out, size_t(C) * sizeof(T)));
  DSX_LAUNCH(column_blocks, kBlock, 0, stream, add_chunk_sums_kernel)(out, scratch, cut.chunks, C);
  check_launch(name);
}

// term(r, c) = m[r * C + c]: plain column sums (bias gradients).
template <class T>
struct MatrixEntry {
  const T* m;
  int C;
  __device__ float operator()(size_t r, int c) const { return to_f(m[r * C + c]); }
};

}  // namespace dsx::kernels::cuda
