// The registration cache on a real libfabric domain (tcp on lo, registration forced on): a
// buffer is registered once and every later transfer from it or a slice of it reuses that
// registration; a new buffer gets its own.
#include <gtest/gtest.h>

#include <cstdlib>
#include <vector>

#include "comm/ofi/endpoint.h"

namespace dsx::comm::ofi {
namespace {

TEST(MrCache, RegistersEachBufferOnceAndReusesIt) {
  setenv("FI_TCP_IFACE", "lo", 1);
  Endpoint ep("tcp", /*force_registration=*/true);
  MrCache& cache = ep.registrations();
  std::vector<char> a(1 << 20), b(64 << 10);
  void* first = cache.desc(a.data(), a.size());
  EXPECT_NE(first, nullptr);
  EXPECT_EQ(cache.registrations(), 1u);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(cache.desc(a.data() + 4096 * i, 4096), first);
  EXPECT_EQ(cache.registrations(), 1u);
  EXPECT_EQ(cache.hits(), 10u);
  cache.desc(b.data(), b.size());
  EXPECT_EQ(cache.registrations(), 2u);
  cache.forget(b.data());
  cache.desc(b.data(), b.size());
  EXPECT_EQ(cache.registrations(), 3u);
}

TEST(MrCache, ProvidersThatNeedNoDescriptorsRegisterNothing) {
  setenv("FI_TCP_IFACE", "lo", 1);
  Endpoint ep("tcp");
  std::vector<char> a(4096);
  EXPECT_EQ(ep.registrations().desc(a.data(), a.size()), nullptr);
  EXPECT_EQ(ep.registrations().registrations(), 0u);
}

}  // namespace
}  // namespace dsx::comm::ofi
