// Checks of the device calls beyond the stream-ordered ones (set-up memory, pinned memory,
// copies now, byte fills, event queries, adopted streams, narrowing, timed events), written once
// against device::Device and run on the cpu device (tests/device) and the cuda device
// (tests/gpu, emulated or real).
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

#include "device/device.h"

namespace dsx::device::testing {

using namespace std::chrono_literals;

// Memory from allocate_now starts zeroed; copy_now moves bytes both ways; fill_bytes writes the
// byte asked for, over exactly the range asked for.
inline void check_memory_now(Device& device) {
  constexpr size_t n = 4099;  // odd: no vector width divides it
  auto* d = static_cast<uint8_t*>(device.allocate_now(n));
  ASSERT_NE(d, nullptr);
  std::vector<uint8_t> back(n, 0xAA);
  device.copy_now(back.data(), d, n);
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(back[i], 0) << "byte " << i << " of fresh memory";
  std::vector<uint8_t> up(n);
  for (size_t i = 0; i < n; ++i) up[i] = static_cast<uint8_t>(i * 7 + 3);
  device.copy_now(d, up.data(), n);
  Stream& s = device.compute_stream();
  device.fill_bytes(d + 100, 0x3f, 1000, s);
  s.synchronize(60s);
  device.copy_now(back.data(), d, n);
  for (size_t i = 0; i < n; ++i) {
    const uint8_t expect = i >= 100 && i < 1100 ? 0x3f : up[i];
    ASSERT_EQ(back[i], expect) << "byte " << i;
  }
  EXPECT_EQ(device.is_device_pointer(d), !device.host_accessible());
  EXPECT_FALSE(device.is_device_pointer(up.data()));
  device.free_now(d);
}

// Pinned memory round-trips through stream-ordered scratch memory on a stream of its own, and an
// event query turns true once the stream got there (and is true for an event never recorded).
inline void check_pinned_and_events(Device& device) {
  constexpr size_t n = 3000;
  const size_t bytes = n * sizeof(float);
  auto* pinned = static_cast<float*>(device.allocate_pinned(bytes));
  ASSERT_NE(pinned, nullptr);
  EXPECT_FALSE(device.is_device_pointer(pinned));
  for (size_t i = 0; i < n; ++i) pinned[i] = 0.5f * static_cast<float>(i) - 7.0f;
  auto stream = device.create_stream("pinned round trip");
  auto done = device.create_event();
  EXPECT_TRUE(device.query(*done));  // never recorded
  void* scratch = device.allocate_scratch(bytes, *stream);
  device.copy(scratch, pinned, bytes, *stream);
  device.scale(kernels::DType::F32, scratch, -2.0f, n, *stream);
  device.copy(pinned, scratch, bytes, *stream);
  device.free(scratch, bytes, *stream);
  stream->record(*done);
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  while (!device.query(*done)) {
    ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "the event never completed";
    std::this_thread::sleep_for(100us);
  }
  device.host_access({}, "read pinned");
  for (size_t i = 0; i < n; ++i)
    ASSERT_EQ(pinned[i], -2.0f * (0.5f * static_cast<float>(i) - 7.0f)) << i;
  device.free_pinned(pinned);
}

// A stream adopted from another's native handle runs work in that stream's order and leaves it
// usable after the wrapper is gone.
inline void check_adopted_stream(Device& device) {
  auto owner = device.create_stream("owner");
  void* native = owner->native();
  if (!native) native = owner.get();  // the cpu device has no native streams
  constexpr size_t n = 256;
  std::vector<float> host(n, 3.0f), back(n, 0.0f);
  void* d = device.allocate_now(n * sizeof(float));
  {
    auto adopted = device.adopt_stream(native, "adopted");
    device.copy(d, host.data(), n * sizeof(float), *adopted);
    adopted->synchronize(60s);
  }
  device.copy(back.data(), d, n * sizeof(float), *owner);
  owner->synchronize(60s);
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(back[i], 3.0f) << i;
  device.make_current();
  device.free_now(d);
}

// narrow_to_float rounds each double as the host's cast does (to nearest, overflow to Inf), and
// timed events on either side of 30 ms of host work on a stream are at least 30 ms apart.
inline void check_narrowing_and_timed_events(Device& device) {
  const std::vector<double> values = {0.1, 1.0 + 1e-12, -123456.789, 3.0, 1e300, -1e-300};
  const size_t n = values.size();
  auto stream = device.create_stream("narrow and time");
  auto* doubles = static_cast<double*>(device.allocate_scratch(n * sizeof(double), *stream));
  auto* floats = static_cast<float*>(device.allocate_scratch(n * sizeof(float), *stream));
  std::vector<float> back(n, -1.0f);
  auto begun = device.create_timed_event();
  auto ended = device.create_timed_event();
  device.copy(doubles, values.data(), n * sizeof(double), *stream);
  stream->record(*begun);
  device.host_task(
      *stream, [] { std::this_thread::sleep_for(30ms); }, {}, "30 ms of host work");
  device.narrow_to_float(doubles, floats, n, *stream);
  stream->record(*ended);
  device.copy(back.data(), floats, n * sizeof(float), *stream);
  device.free(doubles, n * sizeof(double), *stream);
  device.free(floats, n * sizeof(float), *stream);
  stream->synchronize(60s);
  for (size_t i = 0; i < n; ++i) {
    EXPECT_EQ(back[i], static_cast<float>(values[i])) << i;
  }
  const double seconds = device.seconds_between(*begun, *ended);
  EXPECT_GE(seconds, 0.029);
  EXPECT_LT(seconds, 30.0);
}

}  // namespace dsx::device::testing
