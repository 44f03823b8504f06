// See cuda_workspaces.h.
#include "models/cuda_workspaces.h"

#include "dsx/error.h"
#include "kernels/cuda/decoder_layers.h"

namespace dsx::models {

device::OwnedMemory decoder_blas_workspace(device::Device& gpu, size_t max_bias_columns) {
  return device::OwnedMemory(gpu, device::OwnedMemory::Kind::Device,
                             kernels::cuda::DecoderBlas::workspace_bytes(max_bias_columns));
}

StreamWorkspace::~StreamWorkspace() {
  try {
    gpu_.free(data_, bytes_, stream_);
  } catch (const Error&) {
    // A failed GPU keeps the memory until the process ends; a destructor cannot report it.
  }
}

kernels::cuda::Workspace StreamWorkspace::grow(size_t bytes) {
  if (bytes > bytes_) {
    void* grown = gpu_.allocate_scratch(bytes, stream_);
    gpu_.free(data_, bytes_, stream_);  // after the work enqueued so far, which may still use it
    data_ = grown;
    bytes_ = bytes;
  }
  return {data_, bytes_};
}

}  // namespace dsx::models
