// The parameter swap alone: layers within max_in_cpu stay in memory and the rest come from the
// swap file byte for byte, whatever the element size and the blocks the layers straddle; writes
// of any range leave their neighbours unchanged; reads ahead follow the model's direction and
// never serve a value older than the last write; a buffer smaller than a layer is refused.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <random>
#include <vector>

#include "dsx/error.h"
#include "zero/param_swapper.h"

namespace dsx::zero {
namespace {

class ParamSwapperTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = std::filesystem::path(DSX_BINARY_DIR) /
            ("test_param_swapper_" + std::to_string(::getpid()));
    std::filesystem::create_directories(root_);
  }
  void TearDown() override { std::filesystem::remove_all(root_); }

  ParamSwapOptions options(size_t buffer_count, size_t buffer_size, size_t max_in_cpu) const {
    ParamSwapOptions o;
    o.nvme_path = root_.string();
    o.buffer_count = buffer_count;
    o.buffer_size = buffer_size;
    o.max_in_cpu = max_in_cpu;
    o.aio.block_size = 8192;
    o.aio.queue_depth = 2;
    return o;
  }
  std::filesystem::path root_;
};

// Layers of uneven sizes (none a multiple of a disk block), covering [0, numel).
std::vector<std::pair<size_t, size_t>> uneven_layers(size_t* numel) {
  std::vector<std::pair<size_t, size_t>> layers;
  size_t at = 0;
  for (size_t n : {1000u, 3001u, 0u, 517u, 7000u, 2049u, 4096u, 13u, 5000u}) {
    layers.emplace_back(at, at + n);
    at += n;
  }
  *numel = at;
  return layers;
}

std::vector<uint8_t> random_bytes(size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> v(n);
  for (auto& b : v) b = static_cast<uint8_t>(rng());
  return v;
}

TEST_F(ParamSwapperTest, LayersComeBackByteForByteFromMemoryOrDisk) {
  for (size_t esize : {2u, 4u}) {
    size_t numel = 0;
    const auto layers = uneven_layers(&numel);
    MemoryLedger ledger;
    ParamSwapper swapper(options(3, 8000, 4600), layers, numel, esize, 1, ledger);
    EXPECT_EQ(swapper.resident_numel(), 4518u);  // the first four layers: 4518 <= 4600 < 11518
    EXPECT_EQ(ledger.bytes(MemoryKind::Params), 4518 * esize);
    EXPECT_TRUE(std::filesystem::exists(root_ / "dsx_swap/params/rank1/params.tensor.swp"));
    const std::vector<uint8_t> values = random_bytes(numel * esize, 7);
    swapper.write(0, numel, values.data());
    // Forward, then backward, as a model reads them; then a few at random.
    std::vector<int> order;
    for (int l = 0; l < 9; ++l) order.push_back(l);
    for (int l = 8; l >= 0; --l) order.push_back(l);
    for (int l : {4, 1, 8, 5}) order.push_back(l);
    for (int l : order) {
      const auto [begin, end] = layers[static_cast<size_t>(l)];
      std::vector<uint8_t> out((end - begin) * esize + 1, 0xAB);
      swapper.read_layer(l, out.data());
      ASSERT_EQ(0, std::memcmp(out.data(), values.data() + begin * esize, (end - begin) * esize))
          << "layer " << l << ", " << esize << "-byte elements";
      EXPECT_EQ(out.back(), 0xAB) << "read past the layer";
    }
    EXPECT_EQ(swapper.disk_reads(), 2u * 5 + 3);  // the five swapped layers twice, then 4, 8, 5
  }
}

TEST_F(ParamSwapperTest, WritesOfAnyRangeLeaveTheirNeighboursAndAreNeverReadStale) {
  size_t numel = 0;
  const auto layers = uneven_layers(&numel);
  MemoryLedger ledger;
  // Nothing resident, two small buffers: long writes go in many chunks.
  ParamSwapper swapper(options(2, 7000, 0), layers, numel, 4, 0, ledger);
  EXPECT_EQ(swapper.resident_numel(), 0u);
  std::vector<uint8_t> expected = random_bytes(numel * 4, 3);
  swapper.write(0, numel, expected.data());
  std::mt19937 rng(5);
  for (int round = 0; round < 40; ++round) {
    // Read a layer (which reads ahead), overwrite a random range, then check every layer.
    swapper.read_layer(static_cast<int>(rng() % 9), std::vector<uint8_t>(28000).data());
    const size_t begin = rng() % numel;
    const size_t count = 1 + rng() % (numel - begin);
    const std::vector<uint8_t> fresh = random_bytes(count * 4, round);
    std::memcpy(expected.data() + begin * 4, fresh.data(), count * 4);
    swapper.write(begin, count, fresh.data());
    std::vector<uint8_t> all(numel * 4);
    swapper.read(0, numel, all.data());
    ASSERT_EQ(all, expected) << "round " << round;
  }
  for (int l = 0; l < 9; ++l) {
    const auto [begin, end] = layers[static_cast<size_t>(l)];
    std::vector<uint8_t> out((end - begin) * 4);
    swapper.read_layer(l, out.data());
    ASSERT_EQ(0, std::memcmp(out.data(), expected.data() + begin * 4, out.size())) << l;
  }
}

TEST_F(ParamSwapperTest, ABufferSmallerThanASwappedLayerIsRefused) {
  size_t numel = 0;
  const auto layers = uneven_layers(&numel);
  MemoryLedger ledger;
  try {
    ParamSwapper swapper(options(2, 5000, 1000), layers, numel, 2, 0, ledger);
    FAIL() << "a 7000-element layer was accepted with 5000-element buffers";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("offload_param.buffer_size is 5000"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("at least 7000"), std::string::npos) << e.what();
  }
  // The same layer resident (max_in_cpu covers it) needs no buffer.
  ParamSwapper resident(options(2, 5000, numel), layers, numel, 2, 0, ledger);
  EXPECT_EQ(resident.resident_numel(), numel);
  EXPECT_EQ(ledger.bytes(MemoryKind::Buffers), 0u);
}

TEST_F(ParamSwapperTest, TheScratchGoesWithTheRun) {
  {
    MemoryLedger ledger;
    ParamSwapper swapper(options(1, 100, 0), {{0, 100}}, 100, 4, 2, ledger);
    EXPECT_TRUE(std::filesystem::exists(root_ / "dsx_swap/params/rank2"));
    std::vector<float> out(100, 1.0f);
    swapper.read_layer(0, out.data());
    for (float v : out) ASSERT_EQ(v, 0.0f);  // never written: zeros, as the file was reserved
  }
  EXPECT_FALSE(std::filesystem::exists(root_ / "dsx_swap/params/rank2"));
}

}  // namespace
}  // namespace dsx::zero
