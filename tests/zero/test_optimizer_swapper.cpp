// The optimizer swap alone: sub-groups cover the partition in order, each step sees its group's
// values and its changes reach the files, whatever buffer_count and pipelining allow; the host
// buffers are what the ledger says.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <numeric>
#include <random>
#include <vector>

#include "zero/optimizer_swapper.h"

namespace dsx::zero {
namespace {

struct Case {
  size_t buffer_count;
  bool pipeline_read;
  bool pipeline_write;
  size_t slots;  // sub-groups in memory at once
};

class OptimizerSwapperTest : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    root_ = std::filesystem::path(DSX_BINARY_DIR) /
            ("test_optimizer_swapper_" + std::to_string(::getpid()));
    std::filesystem::create_directories(root_);
  }
  void TearDown() override { std::filesystem::remove_all(root_); }
  std::filesystem::path root_;
};

TEST_P(OptimizerSwapperTest, EveryGroupIsSteppedOnceAndWrittenBack) {
  const Case c = GetParam();
  const size_t numel = 10'000;  // sub-groups of 3072 (aligned up from 3000): 4, the last short
  OptimizerSwapOptions options;
  options.nvme_path = root_.string();
  options.sub_group_size = 3000;
  options.buffer_count = c.buffer_count;
  options.pipeline_read = c.pipeline_read;
  options.pipeline_write = c.pipeline_write;
  options.aio.block_size = 4096;
  options.aio.intra_op_parallelism = 2;
  MemoryLedger ledger;
  OptimizerSwapper swapper(options, {"exp_avg", "exp_avg_sq"}, numel, 0, ledger);
  EXPECT_EQ(swapper.groups(), 4u);
  EXPECT_EQ(swapper.slots(), c.slots);
  EXPECT_EQ(ledger.bytes(MemoryKind::Buffers), c.slots * 2 * 3072 * sizeof(float));
  std::vector<float> a(numel), b(numel);
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> value(-1.0f, 1.0f);
  for (size_t i = 0; i < numel; ++i) a[i] = value(rng), b[i] = value(rng);
  swapper.write_state(0, a.data());
  swapper.write_state(1, b.data());
  for (int step = 0; step < 2; ++step) {
    size_t next = 0;
    swapper.for_each_group([&](const OptimizerSwapper::Group& g) {
      EXPECT_EQ(g.begin, next);
      next = g.begin + g.count;
      for (size_t i = 0; i < g.count; ++i) {
        ASSERT_EQ(g.state[0][i], a[g.begin + i] + static_cast<float>(step))
            << "element " << g.begin + i;
        ASSERT_EQ(g.state[1][i], b[g.begin + i] * static_cast<float>(step + 1));
        g.state[0][i] += 1.0f;
        g.state[1][i] = b[g.begin + i] * static_cast<float>(step + 2);
      }
    });
    EXPECT_EQ(next, numel);
  }
  std::vector<float> out(numel);
  swapper.read_state(0, out.data());
  for (size_t i = 0; i < numel; ++i) ASSERT_EQ(out[i], a[i] + 2.0f);
  swapper.read_state(1, out.data());
  for (size_t i = 0; i < numel; ++i) ASSERT_EQ(out[i], b[i] * 3.0f);
}

INSTANTIATE_TEST_SUITE_P(Buffers, OptimizerSwapperTest,
                         ::testing::Values(Case{1, false, false, 1}, Case{4, false, false, 2},
                                           Case{4, true, false, 2}, Case{4, false, true, 2},
                                           Case{4, true, true, 2}, Case{6, true, true, 3},
                                           Case{100, true, true, 3}));

TEST(OptimizerSwapper, TheStateStartsAtZeroAndTheScratchGoesWithTheRun) {
  const auto root = std::filesystem::path(DSX_BINARY_DIR) /
                    ("test_optimizer_swapper_z" + std::to_string(::getpid()));
  std::filesystem::create_directories(root);
  {
    MemoryLedger ledger;
    OptimizerSwapOptions options;
    options.nvme_path = root.string();
    options.sub_group_size = 1 << 20;
    OptimizerSwapper swapper(options, {"sum"}, 5000, 3, ledger);
    EXPECT_TRUE(std::filesystem::exists(root / "dsx_swap/optimizer/rank3/sum.tensor.swp"));
    swapper.for_each_group([](const OptimizerSwapper::Group& g) {
      for (size_t i = 0; i < g.count; ++i) ASSERT_EQ(g.state[0][i], 0.0f);
    });
  }
  EXPECT_FALSE(std::filesystem::exists(root / "dsx_swap/optimizer/rank3"));
  std::filesystem::remove_all(root);
}

}  // namespace
}  // namespace dsx::zero
