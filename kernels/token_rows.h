// The rows of a batch grouped by token, for the GPU's deterministic embedding backward: each
// distinct token's wte gradient row is the sum of its rows' gradients, added in row order by one
// thread per column - no atomics, so the same bits every run. Built on the host from the
// batch's token ids (which the host has anyway) and copied up as one int32 array.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace dsx::kernels {

// Packed as [tokens (U) | offsets (U + 1) | rows (n)]: distinct token u is tokens[u]; its rows,
// ascending, are rows[offsets[u] .. offsets[u + 1]). Tokens ascend too. Size 2U + 1 + n <= 3n + 1.
struct TokenRows {
  std::vector<int32_t> packed;
  int distinct = 0;  // U
  const int32_t* tokens() const { return packed.data(); }
  const int32_t* offsets() const { return packed.data() + distinct; }
  const int32_t* rows() const { return packed.data() + 2 * distinct + 1; }
};

// `vocab`: token ids are in [0, vocab) (checked by the model before).
TokenRows group_rows_by_token(const int32_t* tokens, size_t n, int vocab);

inline constexpr size_t token_rows_capacity(size_t n) { return 3 * n + 1; }

}  // namespace dsx::kernels
