// The stream-order checker catches every access that CUDA would not order (a read after another
// stream's write, a write after another stream's read or write, a host access before a
// synchronize, a free while another stream may still use the memory) and names both accesses;
// it accepts the same accesses once an event wait or a synchronize orders them.
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "device/cpu_device.h"
#include "dsx/error.h"

namespace {

using dsx::device::Access;
using dsx::device::Placement;
using dsx::device::Touch;
using dsx::kernels::DType;
using namespace std::chrono_literals;

struct Checked {
  std::unique_ptr<dsx::device::Device> device = [] {
    dsx::device::CpuDeviceOptions o;
    o.check_order = true;
    return dsx::device::make_cpu_device(o);
  }();
  std::unique_ptr<dsx::device::Stream> a = device->create_stream("a"),
                                       b = device->create_stream("b");
  std::unique_ptr<dsx::device::Event> event = device->create_event();
  float* x = static_cast<float*>(device->allocate(256 * 4, Placement::Private, *a));
  float* y = static_cast<float*>(device->allocate(256 * 4, Placement::Private, *b));
  ~Checked() {
    a->synchronize(10s);
    b->synchronize(10s);
  }
};

std::string violation(const std::function<void()>& f) {
  try {
    f();
  } catch (const dsx::Error& e) {
    return e.what();
  }
  return "";
}

TEST(StreamChecker, AReadOfAnotherStreamsWriteNeedsAnEvent) {
  Checked c;
  c.device->scale(DType::F32, c.x, 2.0f, 256, *c.a);
  const std::string report = violation([&] { c.device->copy(c.y, c.x, 256 * 4, *c.b); });
  ASSERT_FALSE(report.empty()) << "a copy on b of what a wrote, with no wait, must be reported";
  EXPECT_NE(report.find("copy on stream 'b'"), std::string::npos) << report;
  EXPECT_NE(report.find("scale on stream 'a'"), std::string::npos) << report;
  EXPECT_NE(report.find("at "), std::string::npos) << "both call stacks are shown: " << report;

  Checked ok;
  ok.device->scale(DType::F32, ok.x, 2.0f, 256, *ok.a);
  ok.a->record(*ok.event);
  ok.b->wait(*ok.event);
  EXPECT_EQ(violation([&] { ok.device->copy(ok.y, ok.x, 256 * 4, *ok.b); }), "");
}

TEST(StreamChecker, AWriteAfterAnotherStreamsReadNeedsAnEvent) {
  Checked c;
  c.a->record(*c.event);
  c.b->wait(*c.event);                      // b may use x (allocated on a)
  c.device->copy(c.y, c.x, 256 * 4, *c.b);  // b reads x
  const std::string report =
      violation([&] { c.device->fill_zero(c.x, 256 * 4, *c.a); });  // a overwrites it
  EXPECT_NE(report.find("fill_zero on stream 'a'"), std::string::npos) << report;
  EXPECT_NE(report.find("copy on stream 'b'"), std::string::npos) << report;
}

TEST(StreamChecker, OnlyTheTouchedBytesConflict) {
  Checked c;
  c.a->record(*c.event);
  c.b->wait(*c.event);
  c.device->scale(DType::F32, c.x, 2.0f, 128, *c.a);  // a: the first half
  EXPECT_EQ(violation([&] { c.device->scale(DType::F32, c.x + 128, 3.0f, 128, *c.b); }),
            "");  // b: the second
  EXPECT_NE(violation([&] { c.device->scale(DType::F32, c.x + 64, 3.0f, 128, *c.b); }),
            "");  // overlaps a's
}

TEST(StreamChecker, TheHostMustSynchronizeBeforeItReads) {
  Checked c;
  c.device->scale(DType::F32, c.x, 2.0f, 256, *c.a);
  const Touch read{c.x, 16, Access::Read};
  const std::string report = violation([&] {
    c.device->host_access({&read, 1}, "host reads the result");
  });
  EXPECT_NE(report.find("host reads the result on host"), std::string::npos) << report;
  c.a->synchronize(10s);
  EXPECT_EQ(violation([&] { c.device->host_access({&read, 1}, "host reads the result"); }), "");
}

// The compute stream runs on the caller's thread but is a stream of its own: what the model does
// there needs an event before other streams use it, as on a GPU.
TEST(StreamChecker, TheComputeStreamIsAStreamOfItsOwn) {
  Checked c;
  auto& compute = c.device->compute_stream();
  c.device->scale(DType::F32, c.x, 2.0f, 256, *c.a);
  EXPECT_NE(violation([&] { c.device->scale(DType::F32, c.x, 2.0f, 256, compute); }), "");
  c.a->record(*c.event);
  compute.wait(*c.event);  // blocks the host until a reached the event
  EXPECT_EQ(violation([&] { c.device->scale(DType::F32, c.x, 2.0f, 256, compute); }), "");
  const Touch read{c.x, 16, Access::Read};
  EXPECT_NE(violation([&] {
              c.device->host_access({&read, 1}, "host reads");
            }),
            "")
      << "not synchronized";
  compute.synchronize(10s);
  EXPECT_EQ(violation([&] { c.device->host_access({&read, 1}, "host reads"); }), "");
}

TEST(StreamChecker, FreeingMemoryAnotherStreamMayStillUseIsReported) {
  Checked c;
  c.a->record(*c.event);
  c.b->wait(*c.event);
  c.device->copy(c.y, c.x, 256 * 4, *c.b);
  EXPECT_NE(violation([&] { c.device->free(c.x, 256 * 4, *c.a); }), "");
}

TEST(StreamChecker, WhatTheModelDidOnTheComputeStreamNeedsAnEvent) {
  Checked c;
  auto& compute = c.device->compute_stream();
  c.a->record(*c.event);
  compute.wait(*c.event);
  const Touch write{c.x, 64, Access::Write};
  c.device->declare(compute, {&write, 1}, "the model writes gradients");
  EXPECT_NE(violation([&] { c.device->scale(DType::F32, c.x, 0.5f, 16, *c.b); }), "");
  compute.record(*c.event);
  c.b->wait(*c.event);
  EXPECT_EQ(violation([&] { c.device->scale(DType::F32, c.x, 0.5f, 16, *c.b); }), "");
}

// Work the host enqueues after it waited for a stream starts after that stream's work: no event
// is needed then (as with CUDA, where the earlier work has finished).
TEST(StreamChecker, WorkEnqueuedAfterASynchronizeIsOrderedAfterIt) {
  Checked c;
  c.device->scale(DType::F32, c.x, 2.0f, 256, *c.a);
  c.a->synchronize(10s);
  EXPECT_EQ(violation([&] { c.device->copy(c.y, c.x, 256 * 4, *c.b); }), "");
}

TEST(StreamChecker, EventsChainThroughStreams) {
  Checked c;
  auto third = c.device->create_stream("c");
  auto e2 = c.device->create_event();
  c.device->scale(DType::F32, c.x, 2.0f, 256, *c.a);
  c.a->record(*c.event);
  c.b->wait(*c.event);
  c.b->record(*e2);
  third->wait(*e2);  // c waits for b, which waited for a: ordered after a's write
  EXPECT_EQ(violation([&] { c.device->scale(DType::F32, c.x, 2.0f, 256, *third); }), "");
  third->synchronize(10s);
}

}  // namespace
