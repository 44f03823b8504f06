// The workspaces a CUDA model hands to its kernel families (kernels/cuda/workspace.h), allocated
// through device/, since kernels/ may not allocate: DecoderBlas's, once at set-up, and cuDNN
// attention's, which grows when a new shape's graphs need more. Built only with CUDA.
#pragma once

#include <cstddef>

#include "device/device.h"
#include "device/owned_memory.h"
#include "kernels/cuda/workspace.h"

namespace dsx::models {

// DecoderBlas's workspace (cuBLASLt's, then the bias gradient's scratch) for biases of at most
// `max_bias_columns` columns: set-up memory the model keeps as long as its DecoderBlas.
device::OwnedMemory decoder_blas_workspace(device::Device& gpu, size_t max_bias_columns);

inline kernels::cuda::Workspace workspace_of(const device::OwnedMemory& memory) {
  return {memory.get(), memory.bytes()};
}

// A workspace that grows in stream order on the one stream its user enqueues on: the old one is
// freed on that stream after the work already there, the new one allocated there, so growing
// never waits on the host. Given back in stream order when it goes (the stream must outlive it).
class StreamWorkspace {
 public:
  StreamWorkspace(device::Device& gpu, device::Stream& stream) : gpu_(gpu), stream_(stream) {}
  ~StreamWorkspace();
  StreamWorkspace(const StreamWorkspace&) = delete;
  StreamWorkspace& operator=(const StreamWorkspace&) = delete;

  // At least `bytes`: the current workspace when it is big enough, else a new one.
  kernels::cuda::Workspace grow(size_t bytes);
  size_t bytes() const { return bytes_; }

 private:
  device::Device& gpu_;
  device::Stream& stream_;
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace dsx::models
