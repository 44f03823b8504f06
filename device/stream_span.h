// A span of the work a stream runs, timed by the stream itself: host tasks stamp when the stream
// reaches the first and the last of what was enqueued between construction and destruction, so on
// a GPU the span is when the kernels ran, not when the host launched them. It lands on the track
// "<device> <stream>" ("cuda:0 zero.comm"). Does nothing, and enqueues nothing, while no trace is
// being recorded (trace/trace.h).
#pragma once

#include <memory>
#include <string>

#include "device/device.h"
#include "trace/trace.h"

namespace dsx::device {

class StreamSpan {
 public:
  StreamSpan(Device& device, Stream& stream, std::string name, const char* category, trace::Args args = {});
  ~StreamSpan();
  StreamSpan(const StreamSpan&) = delete;
  StreamSpan& operator=(const StreamSpan&) = delete;

 private:
  struct Open {
    std::string name;
    const char* category;
    trace::Args args;
    trace::Clock::time_point begin{};
  };
  Device* device_ = nullptr;
  Stream* stream_ = nullptr;
  std::shared_ptr<Open> open_;  // shared with the host tasks; null while not recording
};

}  // namespace dsx::device
