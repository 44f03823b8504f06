// Device (CUDA) buffers on the ofi backend. Debian's libfabric has no FI_HMEM for CUDA, so the
// backend stages them: copy the input into pinned host memory, run the host algorithm there, and
// copy the output back. Host pointers pass straight through, and a CPU-only build has no device
// memory at all. The caller must have finished the kernels that write the input (synchronise
// the stream) before issuing the operation, as with any host-side collective. The memory and
// the copies are the cuda device's (device/cuda_device.h).
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "device/device.h"

namespace dsx::comm::ofi {

// True for memory cudaMalloc'd on a device (false in CPU-only builds). Touches CUDA only when
// this process chose its GPU (device/cuda_device.h), which every path that allocates device
// memory does first; then it also makes that GPU current on the calling thread.
bool is_device_memory(const void* p);

// Pinned host buffers, grown as needed and kept until the communicator closes (the fabric may
// have registered them), and the copies through them. Used from the worker thread only.
class DeviceStaging {
 public:
  DeviceStaging() = default;
  ~DeviceStaging();
  DeviceStaging(const DeviceStaging&) = delete;
  DeviceStaging& operator=(const DeviceStaging&) = delete;
  void* host(size_t bytes);
  void copy(void* dst, const void* src, size_t bytes);  // returns when done

 private:
  device::Device& gpu();  // the process's GPU, made on first use

  std::unique_ptr<device::Device> gpu_;
  std::vector<void*> buffers_;
  size_t capacity_ = 0;
};

// The host view of one operation's input and output. Device ranges are copied in on
// construction and the output copied back by finish(); when input and output overlap (in-place
// forms) their union is staged, so the pointer relation the algorithm checks still holds.
class HostView {
 public:
  HostView(DeviceStaging& staging, const void* in, size_t in_bytes, void* out, size_t out_bytes);
  const void* in() const { return in_; }
  void* out() const { return out_; }
  void finish();  // copies the output back to the device (no-op for host memory)

 private:
  DeviceStaging& staging_;
  const void* in_;
  void* out_;
  void* device_out_ = nullptr;
  size_t out_bytes_ = 0;
};

}  // namespace dsx::comm::ofi
