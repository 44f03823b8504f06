// Staging device buffers through pinned host memory (see device_staging.h).
#include "comm/ofi/device_staging.h"

#include <algorithm>
#include <cstdint>
#include <string>

#include "dsx/error.h"
#ifdef DSX_HAVE_CUDA
#include <cuda_runtime.h>

#include "kernels/cuda/device.h"
#endif

namespace dsx::comm::ofi {

namespace {

#ifdef DSX_HAVE_CUDA
void cuda_check(cudaError_t rc, const char* what) {
  if (rc != cudaSuccess) {
    throw Error(ErrorKind::Comm, std::string("ofi backend, staging device memory: ") + what + ": " + cudaGetErrorString(rc));
  }
}
#endif

void copy(void* dst, const void* src, size_t bytes) {
#ifdef DSX_HAVE_CUDA
  cuda_check(cudaMemcpy(dst, src, bytes, cudaMemcpyDefault), "cudaMemcpy");
#else
  (void)dst, (void)src, (void)bytes;
#endif
}

}  // namespace

bool is_device_memory(const void* p) {
#ifdef DSX_HAVE_CUDA
  // No GPU chosen in this process (a CPU run of a CUDA build): there is no device memory, and
  // asking CUDA would create a context on GPU 0 from the worker thread. Otherwise ask on our GPU.
  if (kernels::cuda::use_chosen_device() < 0) return false;
  cudaPointerAttributes attr{};
  if (cudaPointerGetAttributes(&attr, p) != cudaSuccess) {
    cudaGetLastError();  // plain host memory on older runtimes: clear the sticky error
    return false;
  }
  return attr.type == cudaMemoryTypeDevice;
#else
  (void)p;
  return false;
#endif
}

DeviceStaging::~DeviceStaging() {
#ifdef DSX_HAVE_CUDA
  if (buffers_.empty()) return;  // never staged: no CUDA call at all
  kernels::cuda::use_chosen_device();
  for (void* b : buffers_) cudaFreeHost(b);
#endif
}

void* DeviceStaging::host(size_t bytes) {
#ifdef DSX_HAVE_CUDA
  if (bytes > capacity_ || buffers_.empty()) {
    capacity_ = std::max(bytes, capacity_ * 2);
    void* b = nullptr;
    cuda_check(cudaMallocHost(&b, std::max<size_t>(capacity_, 64)), "cudaMallocHost");
    buffers_.push_back(b);
  }
  return buffers_.back();
#else
  (void)bytes;
  throw Error(ErrorKind::Internal, "device staging in a CPU-only build");
#endif
}

HostView::HostView(DeviceStaging& staging, const void* in, size_t in_bytes, void* out, size_t out_bytes)
    : in_(in), out_(out) {
  bool device_in = in_bytes && is_device_memory(in), device_out = out_bytes && is_device_memory(out);
  if (!device_in && !device_out) return;
  auto lo_in = reinterpret_cast<uintptr_t>(in), lo_out = reinterpret_cast<uintptr_t>(out);
  bool overlap = in_bytes && out_bytes && lo_in < lo_out + out_bytes && lo_out < lo_in + in_bytes;
  if (overlap) {
    uintptr_t lo = std::min(lo_in, lo_out), hi = std::max(lo_in + in_bytes, lo_out + out_bytes);
    auto* host = static_cast<char*>(staging.host(hi - lo));
    copy(host, reinterpret_cast<void*>(lo), hi - lo);
    in_ = host + (lo_in - lo);
    out_ = host + (lo_out - lo);
  } else {
    auto* host = static_cast<char*>(staging.host(in_bytes + out_bytes));
    if (device_in) {
      copy(host, in, in_bytes);
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
  if (device_out_) copy(device_out_, out_, out_bytes_);
}

}  // namespace dsx::comm::ofi
