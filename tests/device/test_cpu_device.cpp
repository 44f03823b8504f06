// The cpu device's streams and events do what CUDA's do: two streams really run at once, an
// event wait really orders work (checked under random delays, where a missing wait would read
// stale data), failures and timeouts reach the host instead of hanging, and the element kernels
// compute what a double-precision loop does.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <thread>
#include <vector>

#include "device/cpu_device.h"
#include "device_memory_checks.h"
#include "dsx/error.h"

namespace {

using dsx::device::Device;
using dsx::device::Placement;
using dsx::device::Touch;
using namespace std::chrono_literals;

TEST(CpuDevice, TwoStreamsRunAtTheSameTime) {
  auto device = dsx::device::make_cpu_device();
  auto a = device->create_stream("a"), b = device->create_stream("b");
  std::atomic<bool> b_ran{false}, a_saw_b{false};
  // a's task can only finish early if b's task runs while it is still running.
  device->host_task(
      *a,
      [&] {
        const auto deadline = std::chrono::steady_clock::now() + 5s;
        while (!b_ran && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
        a_saw_b = b_ran.load();
      },
      {}, "spin");
  device->host_task(
      *b, [&] { b_ran = true; }, {}, "flag");
  a->synchronize(10s);
  b->synchronize(10s);
  EXPECT_TRUE(a_saw_b);
}

TEST(CpuDevice, AnEventOrdersWorkAcrossStreamsUnderRandomDelays) {
  dsx::device::CpuDeviceOptions options;
  options.max_delay_us = 200;
  auto device = dsx::device::make_cpu_device(options);
  auto producer = device->create_stream("producer"), consumer = device->create_stream("consumer");
  auto ready = device->create_event();
  constexpr size_t n = 4096;
  for (int round = 0; round < 20; ++round) {
    auto* x = static_cast<float*>(device->allocate(n * 4, Placement::Private, *producer));
    auto* y = static_cast<float*>(device->allocate(n * 4, Placement::Private, *consumer));
    device->host_task(
        *producer,
        [x, round] {
          for (size_t i = 0; i < n; ++i) x[i] = static_cast<float>(round + 1);
        },
        {}, "fill");
    device->scale(dsx::kernels::DType::F32, x, 2.0f, n, *producer);
    producer->record(*ready);
    consumer->wait(*ready);
    device->copy(y, x, n * 4, *consumer);
    consumer->synchronize(10s);
    for (size_t i = 0; i < n; i += 512)
      ASSERT_EQ(y[i], 2.0f * static_cast<float>(round + 1)) << "round " << round;
    device->free(x, n * 4, *consumer);  // after the copy that read it
    device->free(y, n * 4, *consumer);
  }
  producer->synchronize(10s);
  consumer->synchronize(10s);
}

TEST(CpuDevice, AFailureReachesTheHostAndTheStreamsThatWaitForIt) {
  auto device = dsx::device::make_cpu_device();
  auto a = device->create_stream("a"), b = device->create_stream("b");
  auto after = device->create_event();
  bool b_ran_later_work = false;
  device->host_task(
      *a, [] { throw dsx::Error(dsx::ErrorKind::Comm, "peer 3 went away"); }, {}, "collective");
  a->record(*after);
  b->wait(*after);
  device->host_task(
      *b, [&] { b_ran_later_work = true; }, {}, "consumer");
  try {
    b->synchronize(10s);
    FAIL() << "b's wait for a failed event must fail b";
  } catch (const dsx::Error& e) {
    EXPECT_EQ(e.kind(), dsx::ErrorKind::Comm);
    EXPECT_NE(std::string(e.what()).find("peer 3"), std::string::npos);
  }
  EXPECT_FALSE(b_ran_later_work);
  EXPECT_THROW(a->synchronize(10s), dsx::Error);
  EXPECT_THROW(device->synchronize(*after, 10s, "the event after the collective"), dsx::Error);
}

TEST(CpuDevice, WaitsTimeOutNamingTheStreams) {
  dsx::device::CpuDeviceOptions options;
  options.timeout = 100ms;
  auto device = dsx::device::make_cpu_device(options);
  auto slow = device->create_stream("slow"), waiter = device->create_stream("waiter");
  auto event = device->create_event();
  device->host_task(
      *slow, [] { std::this_thread::sleep_for(1500ms); }, {}, "sleep");
  slow->record(*event);
  waiter->wait(*event);
  try {
    waiter->synchronize(10s);
    FAIL() << "the waiter must give up after its timeout";
  } catch (const dsx::Error& e) {
    EXPECT_EQ(e.kind(), dsx::ErrorKind::Timeout);
    EXPECT_NE(std::string(e.what()).find("'waiter'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("'slow'"), std::string::npos) << e.what();
  }
  EXPECT_THROW(slow->synchronize(50ms), dsx::Error);  // the host's own wait has its timeout too
  slow->synchronize(10s);
}

TEST(CpuDevice, TheComputeStreamIsTheCallingThread) {
  auto device = dsx::device::make_cpu_device();
  const auto caller = std::this_thread::get_id();
  std::thread::id ran_on;
  device->host_task(
      device->compute_stream(), [&] { ran_on = std::this_thread::get_id(); }, {}, "where");
  EXPECT_EQ(ran_on, caller);  // at once, no synchronize needed
}

TEST(CpuDevice, SumBlocksMatchesADoubleReference) {
  auto device = dsx::device::make_cpu_device();
  auto s = device->create_stream("s");
  constexpr size_t n = 1000, blocks = 3, stride = 1200;
  std::vector<float> src(blocks * stride), dst(n, 0.5f);
  for (size_t i = 0; i < src.size(); ++i) src[i] = std::sin(static_cast<float>(i)) * 3.0f;
  device->sum_blocks(dsx::kernels::DType::F32, src.data(), blocks, stride, 0.25f,
                     dsx::kernels::DType::F32, dst.data(), n, true, *s);
  s->synchronize(10s);
  for (size_t i = 0; i < n; ++i) {
    double expect = 0.5;
    double sum = 0;
    for (size_t b = 0; b < blocks; ++b) sum += src[b * stride + i];
    expect += 0.25 * sum;
    ASSERT_NEAR(dst[i], expect, 1e-5) << i;
  }
}

TEST(CpuDevice, SetUpMemoryCopiesAndFills) {
  auto device = dsx::device::make_cpu_device();
  dsx::device::testing::check_memory_now(*device);
}

TEST(CpuDevice, PinnedMemoryAndEventQueries) {
  auto device = dsx::device::make_cpu_device();
  dsx::device::testing::check_pinned_and_events(*device);
}

TEST(CpuDevice, NarrowsDoublesAndTimesEvents) {
  auto device = dsx::device::make_cpu_device();
  dsx::device::testing::check_narrowing_and_timed_events(*device);
}

TEST(CpuDevice, AnAdoptedStreamRunsWork) {
  auto device = dsx::device::make_cpu_device();
  dsx::device::testing::check_adopted_stream(*device);
}

}  // namespace
