// Staging device buffers through pinned host memory (see device_staging.h).
#include "comm/ofi/device_staging.h"

#include <algorithm>
#include <cstdint>
#include <string>

#include "device/cuda_device.h"
#include "dsx/error.h"

namespace dsx::comm::ofi {

bool is_device_memory(const void* p) { return device::is_device_pointer(p); }

DeviceStaging::~DeviceStaging() {
  if (!gpu_) return;  // never staged: no CUDA call at all
  try {
    for (void* b : buffers_) gpu_->free_pinned(b);
  } catch (const Error&) {
    // A failed GPU keeps the pinned memory until the process ends.
  }
}

device::Device& DeviceStaging::gpu() {
  if (!gpu_) gpu_ = device::make_cuda_device();  // only device memory brings us here
  return *gpu_;
}

void* DeviceStaging::host(size_t bytes) {
  if (bytes > capacity_ || buffers_.empty()) {
    capacity_ = std::max(bytes, capacity_ * 2);
    buffers_.push_back(gpu().allocate_pinned(std::max<size_t>(capacity_, 64)));
  }
  return buffers_.back();
}

void DeviceStaging::copy(void* dst, const void* src, size_t bytes) { gpu().copy_now(dst, src, bytes); }

HostView::HostView(DeviceStaging& staging, const void* in, size_t in_bytes, void* out, size_t out_bytes)
    : staging_(staging), in_(in), out_(out) {
  bool device_in = in_bytes && is_device_memory(in), device_out = out_bytes && is_device_memory(out);
  if (!device_in && !device_out) return;
  auto lo_in = reinterpret_cast<uintptr_t>(in), lo_out = reinterpret_cast<uintptr_t>(out);
  bool overlap = in_bytes && out_bytes && lo_in < lo_out + out_bytes && lo_out < lo_in + in_bytes;
  if (overlap) {
    uintptr_t lo = std::min(lo_in, lo_out), hi = std::max(lo_in + in_bytes, lo_out + out_bytes);
    auto* host = static_cast<char*>(staging.host(hi - lo));
    staging.copy(host, reinterpret_cast<void*>(lo), hi - lo);
    in_ = host + (lo_in - lo);
    out_ = host + (lo_out - lo);
  } else {
    auto* host = static_cast<char*>(staging.host(in_bytes + out_bytes));
    if (device_in) {
      staging.copy(host, in, in_bytes);
      in_ = host;
    }
    if (device_out) out_ = host + in_bytes;
  }
  if (device_out) {
    device_out_ = out;
    out_bytes_ = out_bytes;
  }
}

void HostView::finish() {
  if (device_out_) staging_.copy(device_out_, out_, out_bytes_);
}

}  // namespace dsx::comm::ofi
