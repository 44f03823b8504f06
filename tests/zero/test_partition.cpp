// ZeRO's partition arithmetic: DeepSpeed's padding (2·N for stages 1/2, per-parameter N for
// stage 3), straddling parameters, and full coverage of every element exactly once.
#include <gtest/gtest.h>

#include <numeric>
#include <vector>

#include "zero/partition.h"

using dsx::zero::FlatPartition;
using dsx::zero::Piece;
using dsx::zero::ShardedParams;

TEST(FlatPartition, PadsToTwiceTheWorldSize) {
  std::vector<size_t> numels = {5, 7, 3};  // 15 elements
  FlatPartition p(numels, 4);
  EXPECT_EQ(p.numel(), 15u);
  EXPECT_EQ(p.padded_numel(), 16u);  // multiple of 2*4
  EXPECT_EQ(p.partition_numel(), 4u);
  EXPECT_EQ(p.padding(3), 1u);
  EXPECT_EQ(p.padding(0), 0u);
  FlatPartition q(numels, 3);
  EXPECT_EQ(q.padded_numel(), 18u);  // multiple of 6
  EXPECT_EQ(q.partition_numel(), 6u);
}

TEST(FlatPartition, ParameterStraddlesRanks) {
  std::vector<size_t> numels = {5, 7, 3};
  FlatPartition p(numels, 4);  // partitions [0,4) [4,8) [8,12) [12,16)
  auto r1 = p.pieces_of_rank(1);
  ASSERT_EQ(r1.size(), 2u);
  EXPECT_EQ(r1[0].param, 0u);
  EXPECT_EQ(r1[0].param_offset, 4u);
  EXPECT_EQ(r1[0].count, 1u);
  EXPECT_EQ(r1[1].param, 1u);
  EXPECT_EQ(r1[1].param_offset, 0u);
  EXPECT_EQ(r1[1].count, 3u);
  auto r3 = p.pieces_of_rank(3);  // [12,15) is param 2 and one padding element
  ASSERT_EQ(r3.size(), 1u);
  EXPECT_EQ(r3[0].param, 2u);
  EXPECT_EQ(r3[0].count, 3u);
}

TEST(FlatPartition, EveryElementBelongsToExactlyOneRank) {
  std::vector<size_t> numels = {1, 0, 17, 4, 1000, 3, 0, 9};
  for (int world = 1; world <= 8; ++world) {
    FlatPartition p(numels, world);
    std::vector<int> seen(p.numel(), 0);
    for (int r = 0; r < world; ++r) {
      for (const Piece& piece : p.pieces_of_rank(r)) {
        EXPECT_EQ(piece.flat_offset, p.param_offset(piece.param) + piece.param_offset);
        for (size_t i = 0; i < piece.count; ++i) ++seen[piece.flat_offset + i];
      }
    }
    for (size_t i = 0; i < seen.size(); ++i) ASSERT_EQ(seen[i], 1) << "world " << world << " element " << i;
  }
}

TEST(FlatPartition, MoreRanksThanElements) {
  std::vector<size_t> numels = {3};
  FlatPartition p(numels, 8);
  EXPECT_EQ(p.partition_numel(), 2u);
  EXPECT_EQ(p.pieces_of_rank(2).size(), 0u);
  EXPECT_EQ(p.padding(2), 2u);
  EXPECT_EQ(p.padding(1), 1u);
}

TEST(ShardedParams, PerParameterPadding) {
  std::vector<size_t> numels = {10, 3, 8};
  ShardedParams s(numels, 4);
  EXPECT_EQ(s.shard_numel(0), 3u);  // ceil(10/4)
  EXPECT_EQ(s.shard_numel(1), 1u);
  EXPECT_EQ(s.shard_numel(2), 2u);
  EXPECT_EQ(s.partition_numel(), 6u);
  EXPECT_EQ(s.shard_offset(2), 4u);
  EXPECT_EQ(s.real_in_shard(0, 3), 1u);  // elements 9..9
  EXPECT_EQ(s.real_in_shard(1, 3), 0u);  // pure padding
  size_t total = 0;
  for (size_t p = 0; p < 3; ++p)
    for (int r = 0; r < 4; ++r) total += s.real_in_shard(p, r);
  EXPECT_EQ(total, 21u);
}

#include "zero/layout.h"

using dsx::zero::ParamInfo;
using dsx::zero::ZeroLayout;

TEST(ZeroLayout, LayersBecomeContiguousRanges) {
  // llm.c-style model order interleaves layers: (layer) 0, 1, 2, 1, 2, 0
  std::vector<ParamInfo> params = {{10, 0, true}, {3, 1, false}, {4, 2, true},
                                   {5, 1, true},  {6, 2, false}, {2, 0, false}};
  ZeroLayout layout(params, 3);
  EXPECT_EQ(layout.numel(), 30u);
  EXPECT_EQ(layout.layer_range(0).begin, 0u);
  EXPECT_EQ(layout.layer_range(0).end, 12u);
  EXPECT_EQ(layout.layer_range(1).begin, 12u);
  EXPECT_EQ(layout.layer_range(1).end, 20u);
  EXPECT_EQ(layout.layer_range(2).end, 30u);
  EXPECT_EQ(layout.flat_offset(5), 10u);  // second param of layer 0 keeps model order within the layer
  EXPECT_EQ(layout.flat_offset(3), 15u);
  for (size_t i = 0; i < params.size(); ++i) EXPECT_EQ(layout.index_at(layout.position(i)), i);
}

TEST(ZeroLayout, EmptyLayerHasAnEmptyRange) {
  std::vector<ParamInfo> params = {{4, 0, true}, {4, 2, true}};
  ZeroLayout layout(params, 3);
  EXPECT_EQ(layout.layer_numel(1), 0u);
  EXPECT_EQ(layout.layer_range(2).begin, 4u);
}
