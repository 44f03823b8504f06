// Shared host allocations (comm/host_memory.h): page-aligned, zero-filled, found by any pointer
// into them and only while they live, freed only when they are ours, reused for the same size
// once freed, and a request beyond the host's memory is a clear out_of_memory error up front
// (fallocate would otherwise eat memory until the OOM killer struck).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "comm/host_memory.h"
#include "dsx/error.h"

namespace dsx::comm {
namespace {

TEST(HostMemory, AllocationsAreAlignedZeroedAndFoundWhileTheyLive) {
  const auto page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  auto* a = static_cast<unsigned char*>(allocate_shared_host(10000));
  auto* b = static_cast<unsigned char*>(allocate_shared_host(1));
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a) % page, 0u);
  for (size_t i = 0; i < 10000; ++i) ASSERT_EQ(a[i], 0) << i;

  auto region = find_shared_host_region(a + 100, 50);
  ASSERT_TRUE(region.has_value());
  EXPECT_EQ(region->offset, 100u);
  EXPECT_GE(region->fd, 0);
  EXPECT_NE(region->inode, 0u);
  auto other = find_shared_host_region(b, 1);
  ASSERT_TRUE(other.has_value());
  EXPECT_NE(other->id, region->id);
  EXPECT_NE(other->fd, region->fd);
  const size_t mapped = (10000 + page - 1) / page * page;
  EXPECT_FALSE(find_shared_host_region(a, mapped + 1).has_value()) << "runs past the allocation";

  int plain = 0;
  EXPECT_FALSE(find_shared_host_region(&plain, sizeof plain).has_value());
  void* ordinary = std::malloc(64);
  EXPECT_FALSE(free_shared_host(ordinary)) << "a pointer that is not ours must not be freed";
  std::free(ordinary);

  EXPECT_TRUE(free_shared_host(a));
  EXPECT_FALSE(find_shared_host_region(a, 1).has_value()) << "found after it was freed";
  EXPECT_FALSE(free_shared_host(a)) << "freed twice";
  EXPECT_TRUE(free_shared_host(b));
}

// ZeRO frees and allocates buffers of the same sizes every step: a freed allocation comes back
// for the same size, zero-filled again, under the same number (so peers' mappings stay valid).
TEST(HostMemory, AFreedAllocationIsReusedForTheSameSizeZeroFilled) {
  auto* a = static_cast<unsigned char*>(allocate_shared_host(100000));
  const uint64_t id = find_shared_host_region(a, 1)->id;
  for (size_t i = 0; i < 100000; ++i) a[i] = 0xAB;
  ASSERT_TRUE(free_shared_host(a));
  auto* other_size = static_cast<unsigned char*>(allocate_shared_host(300000));
  EXPECT_NE(other_size, a);
  auto* again = static_cast<unsigned char*>(allocate_shared_host(99000));  // same pages
  EXPECT_EQ(again, a);
  EXPECT_EQ(find_shared_host_region(again, 1)->id, id);
  for (size_t i = 0; i < 99000; ++i) ASSERT_EQ(again[i], 0) << i;
  EXPECT_TRUE(free_shared_host(again));
  EXPECT_TRUE(free_shared_host(other_size));
}

TEST(HostMemory, MoreThanTheHostHasIsAClearErrorUpFront) {
  const size_t available = available_host_memory();
  ASSERT_GT(available, 0u);
  try {
    void* p = allocate_shared_host(available + (size_t{1} << 30));
    free_shared_host(p);
    FAIL() << "allocated more than the host has available";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::OutOfMemory);
    EXPECT_NE(std::string(e.what()).find("out of host memory allocating"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("bytes available"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace dsx::comm
