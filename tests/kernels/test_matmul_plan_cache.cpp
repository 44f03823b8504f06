// The matmul plan cache of the GPT-2 cuBLASLt path: one plan per distinct shape, rebuilt for
// any difference that changes the plan, nothing kept (or leaked) when building throws.
#include <gtest/gtest.h>

#include <memory>
#include <stdexcept>

#include "kernels/matmul_plan_cache.h"

namespace dsx::kernels {
namespace {

int g_live = 0;  // plans alive: what a leak would leave behind

struct FakePlan {
  int id;
  explicit FakePlan(int i) : id(i) { ++g_live; }
  ~FakePlan() { --g_live; }
};

MatmulShape qkv() {
  MatmulShape s;
  s.m = 2304, s.n = 8192, s.k = 768, s.lda = 768, s.ldb = 768, s.ldd = 2304;
  s.trans_a = true, s.dtype = 14, s.epilogue = 4, s.align_a = s.align_b = s.align_d = 256;
  return s;
}

TEST(MatmulPlanCache, EachShapeIsPlannedOnce) {
  MatmulPlanCache<FakePlan> cache;
  int next = 0;
  auto build = [&] { return std::make_unique<FakePlan>(next++); };
  for (int step = 0; step < 100; ++step) EXPECT_EQ(cache.get(qkv(), build).id, 0);
  EXPECT_EQ(cache.builds(), 1u);
  EXPECT_EQ(cache.size(), 1u);
}

TEST(MatmulPlanCache, EveryFieldThatShapesThePlanIsPartOfTheKey) {
  MatmulPlanCache<FakePlan> cache;
  int next = 0;
  auto build = [&] { return std::make_unique<FakePlan>(next++); };
  cache.get(qkv(), build);
  const std::function<void(MatmulShape&)> changes[] = {
      [](MatmulShape& s) { s.m = 768; },       [](MatmulShape& s) { s.n = 4096; },
      [](MatmulShape& s) { s.k = 3072; },      [](MatmulShape& s) { s.lda = 3072; },
      [](MatmulShape& s) { s.ldb = 3072; },    [](MatmulShape& s) { s.ldd = 768; },
      [](MatmulShape& s) { s.trans_a = false; }, [](MatmulShape& s) { s.trans_b = true; },
      [](MatmulShape& s) { s.dtype = 0; },     [](MatmulShape& s) { s.epilogue = 1; },
      [](MatmulShape& s) { s.align_a = 2; },   [](MatmulShape& s) { s.align_b = 4; },
      [](MatmulShape& s) { s.align_d = 8; }};
  size_t expected = 1;
  for (const auto& change : changes) {
    MatmulShape s = qkv();
    change(s);
    EXPECT_FALSE(s == qkv());
    cache.get(s, build);
    EXPECT_EQ(cache.builds(), ++expected);
    cache.get(s, build);
    EXPECT_EQ(cache.builds(), expected) << "a repeated shape was planned again";
  }
}

TEST(MatmulPlanCache, AFailedBuildCachesNothingAndLeaksNothing) {
  {
    MatmulPlanCache<FakePlan> cache;
    auto failing = []() -> std::unique_ptr<FakePlan> {
      auto half_made = std::make_unique<FakePlan>(7);  // owned: freed when the throw unwinds
      throw std::runtime_error("no algorithm for this shape");
    };
    EXPECT_THROW(cache.get(qkv(), failing), std::runtime_error);
    EXPECT_EQ(cache.size(), 0u);
    EXPECT_EQ(g_live, 0);
    EXPECT_EQ(cache.get(qkv(), [] { return std::make_unique<FakePlan>(1); }).id, 1);
    EXPECT_EQ(g_live, 1);
  }
  EXPECT_EQ(g_live, 0);
}

TEST(MatmulPlanCache, StaysSmall) {
  MatmulPlanCache<FakePlan> cache(4);
  for (int i = 0; i < 10; ++i) {
    MatmulShape s = qkv();
    s.n = 1 + i;
    cache.get(s, [i] { return std::make_unique<FakePlan>(i); });
    EXPECT_LE(cache.size(), 4u);
  }
  EXPECT_EQ(g_live, static_cast<int>(cache.size()));
}

}  // namespace
}  // namespace dsx::kernels
