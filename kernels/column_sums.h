// Deterministic column sums of an (N, C) matrix, the reduction behind the GPU's bias and
// LayerNorm parameter gradients: rows are cut into chunks, each chunk's column sums go to its own
// row of an fp32 scratch (chunks, C), then each column's chunk sums are added in chunk order. The
// cut depends on N only - never on the GPU or on timing - so the bits are the same every run,
// unlike atomics, whose order changes from run to run. C++17, host and device.
#pragma once

#include <cstddef>

namespace dsx::kernels {

inline constexpr unsigned kMaxRowChunks = 128;   // enough blocks to fill an H100 for C >= 768
inline constexpr size_t kMinRowsPerChunk = 32;   // below this a chunk is too little work

struct RowChunks {
  size_t rows_per_chunk;
  unsigned chunks;
};

// How N rows are cut: at most kMaxRowChunks chunks of equal size (the last may be short), none
// empty, every row in exactly one.
constexpr RowChunks row_chunks(size_t N) {
  if (N == 0) return {1, 0};
  size_t chunks = (N + kMinRowsPerChunk - 1) / kMinRowsPerChunk;
  if (chunks > kMaxRowChunks) chunks = kMaxRowChunks;
  const size_t per = (N + chunks - 1) / chunks;
  return {per, static_cast<unsigned>((N + per - 1) / per)};
}

// fp32 scratch the two stages need for N rows of C columns.
constexpr size_t column_sums_scratch_floats(size_t N, size_t C) { return size_t(row_chunks(N).chunks) * C; }

}  // namespace dsx::kernels
