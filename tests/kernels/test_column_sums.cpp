// The row cut of the GPU's deterministic column sums (kernels/column_sums.h): every row in
// exactly one chunk, no empty chunk, a bounded scratch, and a cut that depends on N alone.
#include <gtest/gtest.h>

#include <vector>

#include "kernels/column_sums.h"

namespace dsx::kernels {
namespace {

TEST(RowChunks, EveryRowIsInExactlyOneNonEmptyChunk) {
  for (size_t N : {size_t(1), size_t(31), size_t(32), size_t(33), size_t(1000), size_t(4096), size_t(8192),
                   size_t(8193), size_t(65536), size_t(1) << 20}) {
    const RowChunks c = row_chunks(N);
    ASSERT_GE(c.chunks, 1u) << N;
    EXPECT_LE(c.chunks, kMaxRowChunks) << N;
    std::vector<int> seen(N, 0);
    for (unsigned k = 0; k < c.chunks; ++k) {
      const size_t begin = k * c.rows_per_chunk;
      const size_t end = begin + c.rows_per_chunk < N ? begin + c.rows_per_chunk : N;
      EXPECT_LT(begin, end) << "chunk " << k << " of N=" << N << " is empty";
      for (size_t r = begin; r < end; ++r) ++seen[r];
    }
    for (size_t r = 0; r < N; ++r) ASSERT_EQ(seen[r], 1) << "row " << r << " of N=" << N;
  }
}

TEST(RowChunks, SmallInputsUseFewChunksLargeOnesTheMaximum) {
  EXPECT_EQ(row_chunks(32).chunks, 1u);
  EXPECT_EQ(row_chunks(64).chunks, 2u);
  EXPECT_EQ(row_chunks(8192).chunks, kMaxRowChunks);
  EXPECT_EQ(row_chunks(8192).rows_per_chunk, 64u);
  EXPECT_EQ(row_chunks(0).chunks, 0u);
}

TEST(RowChunks, ScratchIsChunksTimesColumns) {
  EXPECT_EQ(column_sums_scratch_floats(8192, 768), size_t(kMaxRowChunks) * 768);
  EXPECT_EQ(column_sums_scratch_floats(40, 3), 2u * 3);
  EXPECT_EQ(column_sums_scratch_floats(0, 768), 0u);
}

}  // namespace
}  // namespace dsx::kernels
