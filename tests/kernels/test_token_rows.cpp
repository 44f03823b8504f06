// Grouping a batch's rows by token for the GPU's deterministic embedding backward: every row
// listed once under its token, rows ascending within a token (the fixed summation order).
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "kernels/token_rows.h"

namespace dsx::kernels {
namespace {

TEST(TokenRows, GroupsRowsUnderTheirTokensInRowOrder) {
  const std::vector<int32_t> tokens = {5, 2, 5, 0, 2, 5};
  TokenRows g = group_rows_by_token(tokens.data(), tokens.size(), 8);
  ASSERT_EQ(g.distinct, 3);
  EXPECT_EQ(std::vector<int32_t>(g.tokens(), g.tokens() + 3), (std::vector<int32_t>{0, 2, 5}));
  EXPECT_EQ(std::vector<int32_t>(g.offsets(), g.offsets() + 4), (std::vector<int32_t>{0, 1, 3, 6}));
  EXPECT_EQ(std::vector<int32_t>(g.rows(), g.rows() + 6), (std::vector<int32_t>{3, 1, 4, 0, 2, 5}));
  EXPECT_LE(g.packed.size(), token_rows_capacity(tokens.size()));
}

TEST(TokenRows, ARandomBatchIsAPartitionOfItsRows) {
  std::mt19937 rng(7);
  const int vocab = 50257;
  std::vector<int32_t> tokens(4096);
  for (auto& t : tokens) t = static_cast<int32_t>(rng() % 300);  // many repeats
  TokenRows g = group_rows_by_token(tokens.data(), tokens.size(), vocab);
  std::vector<int> seen(tokens.size(), 0);
  for (int u = 0; u < g.distinct; ++u) {
    if (u > 0) {
      EXPECT_LT(g.tokens()[u - 1], g.tokens()[u]);
    }
    ASSERT_LT(g.offsets()[u], g.offsets()[u + 1]) << "token " << g.tokens()[u] << " has no rows";
    for (int32_t k = g.offsets()[u]; k < g.offsets()[u + 1]; ++k) {
      const int32_t row = g.rows()[k];
      EXPECT_EQ(tokens[static_cast<size_t>(row)], g.tokens()[u]);
      if (k > g.offsets()[u]) {
        EXPECT_LT(g.rows()[k - 1], row);
      }
      ++seen[static_cast<size_t>(row)];
    }
  }
  for (int s : seen) ASSERT_EQ(s, 1);
  EXPECT_EQ(g.offsets()[g.distinct], static_cast<int32_t>(tokens.size()));
  EXPECT_LE(g.packed.size(), token_rows_capacity(tokens.size()));
}

}  // namespace
}  // namespace dsx::kernels
