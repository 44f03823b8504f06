// What every part of ZeRO works with: the device and its two streams (the model's compute
// stream, and ZeRO's communication stream, on which every collective of ZeRO is issued, so all
// ranks issue them in the same order), the communicator, the memory ledger and the options.
#pragma once

#include <memory>

#include "comm/communicator.h"
#include "device/device.h"
#include "zero/memory.h"
#include "zero/zero_options.h"

namespace dsx::zero {

struct ZeroContext {
  device::Device& device;
  device::Stream& compute;
  device::Stream& comm_stream;
  comm::Communicator& comm;
  MemoryLedger& ledger;
  const ZeroOptions& options;

  template <typename T>
  Buffer<T> buffer(MemoryKind kind, size_t count, device::Stream& stream) {
    return Buffer<T>(device, stream, ledger, kind, count);
  }
  // `to` runs its later work after everything enqueued on `from` so far.
  void order(device::Stream& from, device::Stream& to, device::Event& event) {
    from.record(event);
    to.wait(event);
  }
  // The host waits for the point `event` marks, with ZeRO's communication timeout.
  void wait_for(device::Event& event, const char* what) {
    device.synchronize(event, options.comm_timeout, what);
  }
};

}  // namespace dsx::zero
