// The cpu device: device memory is host memory, a stream is a worker thread that runs its queue
// in order (so work on two streams truly overlaps), an event is a point in a queue that other
// queues and the host really wait for. The compute stream is the calling thread itself, so a CPU
// model runs where it is called. With `check_order`, every access goes through the stream-order
// checker; with `max_delay_us`, each worker sleeps a random time before each piece of work, so a
// missing wait shows up as a wrong result as well as a checker report.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "device/device.h"

namespace dsx::device {

struct CpuDeviceOptions {
  bool check_order = false;
  unsigned max_delay_us = 0;
  uint64_t seed = 1;
  // How long a stream waits for an event of another stream before it fails.
  std::chrono::milliseconds timeout = std::chrono::minutes(5);
  // Placement::Communicated memory (comm's shared host memory); null: private memory.
  std::function<void*(size_t)> allocate_communicated;
  std::function<bool(void*)> free_communicated;  // false: not one of its pointers
};

// `base` with DSX_STREAM_CHECK=1 (the checker on; 0: off) and DSX_STREAM_DELAY_US=N (random
// delays of up to N microseconds) from the environment.
CpuDeviceOptions cpu_device_options_from_environment(CpuDeviceOptions base);

std::unique_ptr<Device> make_cpu_device(CpuDeviceOptions options = {});

}  // namespace dsx::device
