// The direct-I/O layer against the file system: every aio setting moves the same bytes, a
// vanished swap directory and a disk too small fail with the path named.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <csignal>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <vector>

#include "dsx/error.h"
#include "swap/aio_handle.h"
#include "swap/aligned_buffer.h"
#include "swap/swap_directory.h"
#include "tests/expect_contains.h"

namespace dsx::swap {
namespace {

namespace fs = std::filesystem;

class AioHandleTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::path(DSX_BINARY_DIR) / ("test_aio_handle_" + std::to_string(::getpid()));
    fs::create_directories(root_);
  }
  void TearDown() override { fs::remove_all(root_); }
  fs::path root_;
};

// Bytes no two positions share within 2^32, so a block read back at the wrong offset shows.
void fill_pattern(uint32_t* words, size_t n, uint32_t seed) {
  for (size_t i = 0; i < n; ++i) words[i] = static_cast<uint32_t>(i) * 2654435761u + seed;
}

TEST_F(AioHandleTest, EverySettingWritesAndReadsBackTheSameBytes) {
  SwapDirectory dir(root_.string(), "test", 0);
  const size_t bytes = 5 * 65536 + 3 * 4096;  // not a multiple of any block size below
  const std::string file = dir.create_file("data.swp", bytes + 8192);
  struct Case {
    size_t block;
    int depth;
    int threads;
    bool single_submit;
    bool overlap;
  };
  const Case cases[] = {{65536, 8, 1, false, true},
                        {65536, 2, 1, true, true},
                        {16384, 4, 3, false, false},
                        {4096, 1, 2, true, false},
                        {1048576, 8, 4, false, true}};
  uint32_t seed = 1;
  for (const Case& c : cases) {
    AioHandle handle({.block_size = c.block,
                      .queue_depth = c.depth,
                      .intra_op_parallelism = c.threads,
                      .single_submit = c.single_submit,
                      .overlap_events = c.overlap});
    AlignedBuffer out(bytes, true);
    AlignedBuffer in(bytes, false);
    fill_pattern(out.as<uint32_t>(), bytes / 4, ++seed);
    handle.write(file, out.data(), bytes, 8192);
    handle.read(file, in.data(), bytes, 8192);
    EXPECT_EQ(std::memcmp(in.data(), out.data(), bytes), 0)
        << "block " << c.block << " threads " << c.threads;
  }
  // The bytes are in the file, where a plain read finds them (the last case's pattern).
  std::ifstream plain(file, std::ios::binary);
  plain.seekg(8192 + 4);
  uint32_t second = 0;
  plain.read(reinterpret_cast<char*>(&second), 4);
  EXPECT_EQ(second, 2654435761u + seed);
}

TEST_F(AioHandleTest, TransfersInFlightTogetherFinishApart) {
  SwapDirectory dir(root_.string(), "test", 1);
  const size_t bytes = 256 * 1024;
  const std::string a = dir.create_file("a.swp", bytes);
  const std::string b = dir.create_file("b.swp", bytes);
  AioHandle handle({.block_size = 65536, .queue_depth = 4, .intra_op_parallelism = 2});
  AlignedBuffer x(bytes, true), y(bytes, true), rx(bytes, true), ry(bytes, true);
  fill_pattern(x.as<uint32_t>(), bytes / 4, 7);
  fill_pattern(y.as<uint32_t>(), bytes / 4, 9);
  IoTicket wa = handle.submit({IoKind::Write, a, x.data(), bytes, 0});
  IoTicket wb = handle.submit({IoKind::Write, b, y.data(), bytes, 0});
  wb.wait(std::chrono::seconds(30));
  wa.wait(std::chrono::seconds(30));
  IoTicket ra = handle.submit({IoKind::Read, a, rx.data(), bytes, 0});
  IoTicket rb = handle.submit({IoKind::Read, b, ry.data(), bytes, 0});
  ra.wait(std::chrono::seconds(30));
  rb.wait(std::chrono::seconds(30));
  EXPECT_EQ(std::memcmp(rx.data(), x.data(), bytes), 0);
  EXPECT_EQ(std::memcmp(ry.data(), y.data(), bytes), 0);
}

TEST_F(AioHandleTest, AVanishedSwapDirectoryIsAnErrorNamingTheFile) {
  auto dir = std::make_unique<SwapDirectory>(root_.string(), "test", 2);
  const std::string file = dir->create_file("state.swp", 65536);
  AioHandle handle({.block_size = 65536});
  AlignedBuffer buffer(65536, false);
  handle.write(file, buffer.data(), 65536, 0);
  fs::remove_all(root_ / "dsx_swap");  // as a cleaner or an unmount would, mid-run
  try {
    handle.write(file, buffer.data(), 65536, 0);
    FAIL() << "a write into a removed directory succeeded";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Io);
    EXPECT_CONTAINS(e.what(), file);
    EXPECT_CONTAINS(e.what(), "last checkpoint");
  }
  EXPECT_THROW(handle.read(file, buffer.data(), 65536, 0), Error);
}

TEST_F(AioHandleTest, ATransferPastTheReservedEndIsRefusedAndNeverExtendsTheFile) {
  SwapDirectory dir(root_.string(), "test", 4);
  const std::string file = dir.create_file("state.swp", 65536);
  AioHandle handle({.block_size = 16384, .queue_depth = 4, .intra_op_parallelism = 2});
  AlignedBuffer buffer(131072, false);
  handle.write(file, buffer.data(), 65536, 0);  // exactly the reserved size: fine
  for (const auto& [bytes, offset] : {std::pair<size_t, size_t>{131072, 0}, {8192, 61440}}) {
    try {
      handle.write(file, buffer.data(), bytes, offset);
      FAIL() << "a write of " << bytes << " bytes at " << offset << " went past the end";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::Io);
      EXPECT_CONTAINS(e.what(), file);
      EXPECT_CONTAINS(e.what(), "past the file's end (65536 bytes)");
    }
    EXPECT_EQ(fs::file_size(file), 65536u);
  }
  // Cut short under the run (another job, a cleaner): the next read names the file.
  fs::resize_file(file, 32768);
  try {
    handle.read(file, buffer.data(), 65536, 0);
    FAIL() << "a read past a truncated file's end succeeded";
  } catch (const Error& e) {
    EXPECT_CONTAINS(e.what(), file);
    EXPECT_CONTAINS(e.what(), "truncated or replaced during the run");
  }
}

TEST_F(AioHandleTest, ADiskTooSmallFailsWhenTheFileIsMadeNamingNvmePath) {
  // A real limit on file size, without root: RLIMIT_FSIZE makes fallocate past it fail (EFBIG),
  // as a full drive makes it fail with ENOSPC.
  SwapDirectory dir(root_.string(), "test", 3);
  rlimit old{};
  ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &old), 0);
  auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
  rlimit small = old;
  small.rlim_cur = 1 << 20;
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &small), 0);
  std::string message;
  try {
    dir.create_file("big.swp", 8 << 20);
  } catch (const Error& e) {
    message = e.what();
  }
  setrlimit(RLIMIT_FSIZE, &old);
  std::signal(SIGXFSZ, old_handler);
  EXPECT_CONTAINS(message, root_.string());
  EXPECT_CONTAINS(message, "too small");
}

TEST_F(AioHandleTest, AMissingNvmePathIsAnErrorNamingIt) {
  const std::string missing = (root_ / "no_such_drive").string();
  try {
    SwapDirectory dir(missing, "optimizer", 0);
    FAIL() << "a swap directory under a missing nvme_path";
  } catch (const Error& e) {
    EXPECT_CONTAINS(e.what(), missing);
    EXPECT_CONTAINS(e.what(), "nvme_path");
  }
}

TEST_F(AioHandleTest, UnalignedBlockSizeIsAConfigError) {
  EXPECT_THROW(AioHandle({.block_size = 1000}), Error);
  EXPECT_THROW(AioHandle({.queue_depth = 0}), Error);
}

}  // namespace
}  // namespace dsx::swap
