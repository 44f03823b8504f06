// The CUDA runtime API calls dsx makes, on the emulated GPU. Each returns what the real runtime
// returns for the same call, and refuses more: a copy whose kind does not match where its
// pointers live, a range past its allocation. A refusal also says why on stderr.
#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "tests/emulated_gpu/memory.h"
#include "tests/emulated_gpu/order_check.h"
#include "tests/emulated_gpu/runtime.h"
#include "tests/emulated_gpu/streams.h"

using namespace dsx::emu;

namespace {

cudaError_t refuse(cudaError_t error, const std::string& call, const std::string& why) {
  say(call + ": " + why);
  return set_last_error(error);
}

// The kinds a copy's two pointers must have, from where they live (cudaMemcpyDefault) or as the
// caller said; an error when the caller's kind contradicts the pointers.
cudaError_t check_copy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind,
                       const char* call) {
  if (bytes == 0) return cudaSuccess;
  if (!dst || !src) return refuse(cudaErrorInvalidValue, call, "a null pointer");
  const PointerInfo d = locate(dst), s = locate(src);
  const bool d_dev = d.kind == MemoryKind::Device, s_dev = s.kind == MemoryKind::Device;
  bool want_d_dev = d_dev, want_s_dev = s_dev;
  switch (kind) {
    case cudaMemcpyHostToDevice: want_s_dev = false, want_d_dev = true; break;
    case cudaMemcpyDeviceToHost: want_s_dev = true, want_d_dev = false; break;
    case cudaMemcpyDeviceToDevice: want_s_dev = want_d_dev = true; break;
    case cudaMemcpyHostToHost: want_s_dev = want_d_dev = false; break;
    case cudaMemcpyDefault: break;
    default: return refuse(cudaErrorInvalidMemcpyDirection, call, "an unknown copy kind");
  }
  std::string why;
  if (!check_range(src, bytes, want_s_dev ? MemoryKind::Device : MemoryKind::Pageable, &why))
    return refuse(cudaErrorInvalidValue, call, "source: " + why);
  if (!check_range(dst, bytes, want_d_dev ? MemoryKind::Device : MemoryKind::Pageable, &why))
    return refuse(cudaErrorInvalidValue, call, "destination: " + why);
  return cudaSuccess;
}

// `wait_for_pageable`: a copy into pageable host memory returns only once it landed (as
// cudaMemcpyAsync does; cudaMemcpy waits for every copy itself).
cudaError_t copy_async(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind,
                       cudaStream_t stream, const char* call, bool wait_for_pageable) {
  if (cudaError_t e = sticky_error()) return e;
  if (cudaError_t e = check_copy(dst, src, bytes, kind, call)) return e;
  if (bytes == 0) return cudaSuccess;
  const PointerInfo s = locate(src), d = locate(dst);
  cudaError_t e;
  if (s.kind == MemoryKind::Pageable && d.kind == MemoryKind::Device) {
    // From pageable memory CUDA stages the source before returning: the caller may reuse it.
    auto staged = std::make_shared<std::vector<std::byte>>(static_cast<const std::byte*>(src),
                                                           static_cast<const std::byte*>(src) + bytes);
    e = enqueue(
        stream, call,
        [dst, staged] {
          std::memcpy(dst, staged->data(), staged->size());
          return std::string();
        },
        {{dst, bytes, true}});
  } else {
    e = enqueue(
        stream, call,
        [dst, src, bytes] {
          std::memmove(dst, src, bytes);
          return std::string();
        },
        {{src, bytes, false}, {dst, bytes, true}});
  }
  if (e) return set_last_error(e);
  // Into pageable memory the copy is synchronous for the host, as on CUDA.
  if (wait_for_pageable && d.kind == MemoryKind::Pageable && s.kind == MemoryKind::Device)
    return synchronize_stream(stream);
  return cudaSuccess;
}

}  // namespace

extern "C" {

cudaError_t cudaGetDeviceCount(int* count) {
  if (!count) return cudaErrorInvalidValue;
  *count = device_count();
  return *count ? cudaSuccess : set_last_error(cudaErrorNoDevice);
}

cudaError_t cudaSetDevice(int device) {
  if (device < 0 || device >= device_count()) return set_last_error(cudaErrorInvalidDevice);
  set_current_device(device);
  return cudaSuccess;
}

cudaError_t cudaGetDevice(int* device) {
  if (!device) return cudaErrorInvalidValue;
  *device = current_device();
  return cudaSuccess;
}

cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int device) {
  if (!value) return cudaErrorInvalidValue;
  if (device < 0 || device >= device_count()) return set_last_error(cudaErrorInvalidDevice);
  switch (attr) {
    case cudaDevAttrMultiProcessorCount: *value = multiprocessor_count(); break;
    case cudaDevAttrMaxThreadsPerBlock: *value = 1024; break;
    case cudaDevAttrMaxBlockDimX: case cudaDevAttrMaxBlockDimY: *value = 1024; break;
    case cudaDevAttrMaxBlockDimZ: *value = 64; break;
    case cudaDevAttrMaxGridDimX: *value = 0x7fffffff; break;
    case cudaDevAttrMaxGridDimY: case cudaDevAttrMaxGridDimZ: *value = 65535; break;
    case cudaDevAttrMaxSharedMemoryPerBlock: *value = 48 * 1024; break;
    case cudaDevAttrMaxSharedMemoryPerBlockOptin: *value = 48 * 1024; break;
    case cudaDevAttrWarpSize: *value = 32; break;
    case cudaDevAttrComputeCapabilityMajor: *value = 9; break;
    case cudaDevAttrComputeCapabilityMinor: *value = 0; break;
    case cudaDevAttrMemoryPoolsSupported: *value = 1; break;
    case cudaDevAttrUnifiedAddressing: *value = 1; break;
    case cudaDevAttrPciBusId: *value = physical_gpu(device); break;
    case cudaDevAttrPciDeviceId: case cudaDevAttrPciDomainId: *value = 0; break;
    default:
      return refuse(cudaErrorInvalidValue, "cudaDeviceGetAttribute",
                    "attribute " + std::to_string(int(attr)) +
                        " is not emulated; add it to tests/emulated_gpu/cudart.cpp");
  }
  return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device) {
  if (!prop) return cudaErrorInvalidValue;
  if (device < 0 || device >= device_count()) return set_last_error(cudaErrorInvalidDevice);
  std::memset(prop, 0, sizeof *prop);
  std::snprintf(prop->name, sizeof prop->name, "dsx emulated GPU %d", physical_gpu(device));
  prop->totalGlobalMem = device_memory_bytes();
  prop->sharedMemPerBlock = 48 * 1024;
  prop->sharedMemPerBlockOptin = 48 * 1024;
  prop->warpSize = 32;
  prop->maxThreadsPerBlock = 1024;
  prop->maxThreadsDim[0] = prop->maxThreadsDim[1] = 1024;
  prop->maxThreadsDim[2] = 64;
  prop->maxGridSize[0] = 0x7fffffff;
  prop->maxGridSize[1] = prop->maxGridSize[2] = 65535;
  prop->multiProcessorCount = multiprocessor_count();
  prop->major = 9;
  prop->minor = 0;
  prop->pciBusID = physical_gpu(device);
  prop->unifiedAddressing = 1;
  return cudaSuccess;
}

cudaError_t cudaMemGetInfo(size_t* free_bytes, size_t* total) {
  if (!free_bytes || !total) return cudaErrorInvalidValue;
  *total = device_memory_bytes();
  *free_bytes = *total - device_used(current_device());
  return cudaSuccess;
}

cudaError_t cudaRuntimeGetVersion(int* v) {
  if (!v) return cudaErrorInvalidValue;
  *v = CUDART_VERSION;
  return cudaSuccess;
}

cudaError_t cudaDriverGetVersion(int* v) {
  if (!v) return cudaErrorInvalidValue;
  *v = CUDART_VERSION;
  return cudaSuccess;
}

cudaError_t cudaGetLastError(void) { return take_last_error(); }
cudaError_t cudaPeekAtLastError(void) { return peek_last_error(); }

// ---- memory ----
cudaError_t cudaMalloc(void** p, size_t bytes) {
  if (!p) return cudaErrorInvalidValue;
  if (cudaError_t e = sticky_error()) return e;
  *p = device_allocate(current_device(), bytes);
  if (!*p) return set_last_error(cudaErrorMemoryAllocation);
  order_forget(*p, bytes);
  // Fresh memory holds NaNs (0xff bytes): a read before the first write shows, as garbage would.
  with_device_access([&] { std::memset(*p, 0xff, bytes); });
  return cudaSuccess;
}

cudaError_t cudaFree(void* p) {
  if (!p) return cudaSuccess;
  if (cudaError_t e = synchronize_device()) return e;  // cudaFree synchronises, as on CUDA
  if (!device_free(p))
    return refuse(cudaErrorInvalidValue, "cudaFree", "not a live device allocation (freed twice?)");
  return cudaSuccess;
}

cudaError_t cudaMallocAsync(void** p, size_t bytes, cudaStream_t stream) {
  if (!p) return cudaErrorInvalidValue;
  if (cudaError_t e = sticky_error()) return e;
  const int device = stream_device(stream);
  if (device < 0) return set_last_error(cudaErrorInvalidResourceHandle);
  *p = device_allocate(device, bytes);
  if (!*p) return set_last_error(cudaErrorMemoryAllocation);
  void* at = *p;
  order_forget(at, bytes);
  return enqueue(
      stream, "cudaMallocAsync",
      [at, bytes] {
        std::memset(at, 0xff, bytes);
        return std::string();
      },
      {{at, bytes, true}});
}

// One default pool per device, as a handle that names it; the emulated pool returns memory at
// once, so a release threshold is accepted and changes nothing. Other attributes are refused.
cudaError_t cudaDeviceGetDefaultMemPool(cudaMemPool_t* pool, int device) {
  if (!pool) return cudaErrorInvalidValue;
  if (device < 0 || device >= device_count()) return set_last_error(cudaErrorInvalidDevice);
  *pool = reinterpret_cast<cudaMemPool_t>(static_cast<uintptr_t>(device) + 1);
  return cudaSuccess;
}

cudaError_t cudaMemPoolSetAttribute(cudaMemPool_t pool, cudaMemPoolAttr attr, void* value) {
  const auto device = static_cast<int64_t>(reinterpret_cast<uintptr_t>(pool)) - 1;
  if (!value || device < 0 || device >= device_count())
    return refuse(cudaErrorInvalidValue, "cudaMemPoolSetAttribute", "not a default pool's handle");
  if (attr != cudaMemPoolAttrReleaseThreshold)
    return refuse(cudaErrorNotSupported, "cudaMemPoolSetAttribute",
                  "only cudaMemPoolAttrReleaseThreshold is emulated");
  return cudaSuccess;
}

cudaError_t cudaFreeAsync(void* p, cudaStream_t stream) {
  if (!p) return cudaSuccess;
  if (locate(p).kind != MemoryKind::Device)
    return refuse(cudaErrorInvalidValue, "cudaFreeAsync", "not device memory");
  // Returned to the pool when the stream gets there: work before it may still use the memory.
  return enqueue(stream, "cudaFreeAsync", [p]() -> std::string {
    return device_free(p) ? "" : "freed memory that is not a live allocation (freed twice?)";
  });
}

cudaError_t cudaMallocHost(void** p, size_t bytes) {
  if (!p) return cudaErrorInvalidValue;
  *p = pinned_allocate(bytes);
  return *p ? cudaSuccess : set_last_error(cudaErrorMemoryAllocation);
}

cudaError_t cudaHostAlloc(void** p, size_t bytes, unsigned) { return cudaMallocHost(p, bytes); }

cudaError_t cudaFreeHost(void* p) {
  if (!p) return cudaSuccess;
  if (cudaError_t e = synchronize_device()) return e;
  return pinned_free(p) ? cudaSuccess
                        : refuse(cudaErrorInvalidValue, "cudaFreeHost", "not pinned host memory");
}

cudaError_t cudaPointerGetAttributes(cudaPointerAttributes* a, const void* p) {
  if (!a) return cudaErrorInvalidValue;
  const PointerInfo info = locate(p);
  std::memset(a, 0, sizeof *a);
  a->device = info.kind == MemoryKind::Device ? info.device : current_device();
  switch (info.kind) {
    case MemoryKind::Device:
      a->type = cudaMemoryTypeDevice;
      a->devicePointer = const_cast<void*>(p);
      break;
    case MemoryKind::Pinned:
      a->type = cudaMemoryTypeHost;
      a->devicePointer = a->hostPointer = const_cast<void*>(p);
      break;
    case MemoryKind::Pageable:
      a->type = cudaMemoryTypeUnregistered;
      break;
  }
  return cudaSuccess;
}

cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
  // From pageable host memory to the device CUDA returns once the source is staged, before the
  // data lands: only the legacy stream's later work is ordered after it. Else it waits.
  const bool staged = bytes && locate(src).kind == MemoryKind::Pageable &&
                      locate(dst).kind == MemoryKind::Device;
  if (cudaError_t e = copy_async(dst, src, bytes, kind, nullptr, "cudaMemcpy", false)) return e;
  return staged ? cudaSuccess : synchronize_stream(nullptr);
}

cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind,
                            cudaStream_t stream) {
  return copy_async(dst, src, bytes, kind, stream, "cudaMemcpyAsync", true);
}

cudaError_t cudaMemsetAsync(void* p, int value, size_t bytes, cudaStream_t stream) {
  if (cudaError_t e = sticky_error()) return e;
  std::string why;
  if (bytes && !check_range(p, bytes, MemoryKind::Device, &why))
    return refuse(cudaErrorInvalidValue, "cudaMemset", why);
  return enqueue(
      stream, "cudaMemset",
      [p, value, bytes] {
        std::memset(p, value, bytes);
        return std::string();
      },
      {{p, bytes, true}});
}

cudaError_t cudaMemset(void* p, int value, size_t bytes) {
  return cudaMemsetAsync(p, value, bytes, nullptr);
}

// ---- streams and events ----
cudaError_t cudaStreamCreate(cudaStream_t* s) { return create_stream(s, cudaStreamDefault); }
cudaError_t cudaStreamCreateWithFlags(cudaStream_t* s, unsigned flags) {
  return create_stream(s, flags);
}
cudaError_t cudaStreamDestroy(cudaStream_t s) { return destroy_stream(s); }
cudaError_t cudaStreamSynchronize(cudaStream_t s) { return synchronize_stream(s); }
cudaError_t cudaStreamQuery(cudaStream_t s) { return query_stream(s); }
cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned) {
  return stream_wait_event(s, e);
}
cudaError_t cudaDeviceSynchronize(void) { return synchronize_device(); }

cudaError_t cudaLaunchHostFunc(cudaStream_t s, cudaHostFn_t fn, void* data) {
  if (!fn) return cudaErrorInvalidValue;
  return enqueue(s, "cudaLaunchHostFunc", [fn, data] {
    fn(data);
    return std::string();
  });
}

cudaError_t cudaEventCreate(cudaEvent_t* e) { return create_event(e, cudaEventDefault); }
cudaError_t cudaEventCreateWithFlags(cudaEvent_t* e, unsigned flags) {
  return create_event(e, flags);
}
cudaError_t cudaEventDestroy(cudaEvent_t e) { return destroy_event(e); }
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s) { return record_event(e, s); }
cudaError_t cudaEventQuery(cudaEvent_t e) { return query_event(e); }
cudaError_t cudaEventSynchronize(cudaEvent_t e) { return synchronize_event(e); }
cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t a, cudaEvent_t b) {
  return event_elapsed(ms, a, b);
}

// ---- errors ----
const char* cudaGetErrorName(cudaError_t e) {
  switch (e) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    case cudaErrorInvalidConfiguration: return "cudaErrorInvalidConfiguration";
    case cudaErrorInvalidDevice: return "cudaErrorInvalidDevice";
    case cudaErrorInvalidMemcpyDirection: return "cudaErrorInvalidMemcpyDirection";
    case cudaErrorNoDevice: return "cudaErrorNoDevice";
    case cudaErrorInvalidResourceHandle: return "cudaErrorInvalidResourceHandle";
    case cudaErrorNotReady: return "cudaErrorNotReady";
    case cudaErrorLaunchFailure: return "cudaErrorLaunchFailure";
    case cudaErrorLaunchTimeout: return "cudaErrorLaunchTimeout";
    case cudaErrorNotSupported: return "cudaErrorNotSupported";
    default: return "cudaErrorUnknown";
  }
}

const char* cudaGetErrorString(cudaError_t e) {
  switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
    case cudaErrorInvalidDevice: return "invalid device ordinal";
    case cudaErrorInvalidMemcpyDirection: return "invalid copy direction for memcpy";
    case cudaErrorNoDevice: return "no CUDA-capable device is detected";
    case cudaErrorInvalidResourceHandle: return "invalid resource handle";
    case cudaErrorNotReady: return "device not ready";
    case cudaErrorLaunchFailure: return "unspecified launch failure";
    case cudaErrorLaunchTimeout: return "the launch timed out and was terminated";
    case cudaErrorNotSupported: return "operation not supported";
    default: return "unknown error";
  }
}

}  // extern "C"
