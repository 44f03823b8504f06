// The stream-order checker of the cpu device (device/stream_checker.h), run over the emulated
// GPU's streams: each stream is an actor, every copy, memset, kernel, cuBLASLt matmul and NCCL
// operation declares the ranges it reads and writes when it is enqueued, events and host waits
// carry clocks. A range touched by two streams with no event or host wait ordering them is a
// fault of the device, reported with both operations' enqueuing stacks - even when this run's
// timing hid it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tests/emulated_gpu/runtime.h"

namespace dsx::emu {

using OrderClock = std::vector<uint64_t>;
inline constexpr int kHostActor = 0;

int add_order_actor(const std::string& name);
// Records `actor`'s operation; returns the report of an unordered access, or "".
std::string order_access(int actor, const std::vector<Touch>& touches, const char* what);
OrderClock order_snapshot(int actor);
void order_merge(int actor, const OrderClock& clock);
// A range starts fresh: a new allocation.
void order_forget(const void* data, size_t bytes);

}  // namespace dsx::emu
