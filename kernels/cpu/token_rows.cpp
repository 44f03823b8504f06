// Grouping a batch's rows by token (see kernels/token_rows.h): a counting sort, stable in rows.
#include "kernels/token_rows.h"

namespace dsx::kernels {

TokenRows group_rows_by_token(const int32_t* tokens, size_t n, int vocab) {
  std::vector<int32_t> count(static_cast<size_t>(vocab) + 1, 0);
  for (size_t i = 0; i < n; ++i) ++count[static_cast<size_t>(tokens[i]) + 1];
  TokenRows out;
  for (int v = 0; v < vocab; ++v) out.distinct += count[static_cast<size_t>(v) + 1] > 0;
  const auto U = static_cast<size_t>(out.distinct);
  out.packed.assign(2 * U + 1 + n, 0);
  int32_t* tok = out.packed.data();
  int32_t* off = tok + U;
  int32_t* rows = off + U + 1;
  // Start of each token's rows, then the distinct tokens with their offsets.
  for (int v = 0; v < vocab; ++v) count[static_cast<size_t>(v) + 1] += count[static_cast<size_t>(v)];
  size_t u = 0;
  for (int v = 0; v < vocab; ++v) {
    if (count[static_cast<size_t>(v) + 1] == count[static_cast<size_t>(v)]) continue;
    tok[u] = v;
    off[u] = count[static_cast<size_t>(v)];
    ++u;
  }
  off[U] = static_cast<int32_t>(n);
  for (size_t i = 0; i < n; ++i) rows[count[static_cast<size_t>(tokens[i])]++] = static_cast<int32_t>(i);
  return out;
}

}  // namespace dsx::kernels
