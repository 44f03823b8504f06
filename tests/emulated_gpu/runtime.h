// The emulated GPU's runtime, as its cudart, cuBLASLt and NCCL emulations see it: devices with
// their own memory, streams that are worker threads running their work in order, and the checks
// a GPU makes (or should make) on where pointers live.
//
// Device memory is host memory the host cannot touch: it lies in one reserved region per device
// that is readable only while some stream's work runs, so a host read of a device pointer while
// the emulated GPU is idle faults with a message naming the allocation.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace dsx::emu {

// ---- devices ----
int device_count();           // visible devices (DSX_EMULATED_GPUS, less CUDA_VISIBLE_DEVICES)
int current_device();         // this host thread's, as cudaSetDevice left it
void set_current_device(int device);
// The physical GPU behind a visible ordinal, the same number in every process of the machine
// (what NCCL's "one rank per GPU" rule compares).
int physical_gpu(int device);
size_t device_memory_bytes();  // per device (DSX_EMULATED_GPU_MEMORY, default 8 GiB)
int multiprocessor_count();    // per device (DSX_EMULATED_SMS, default 2): grids stay small

// ---- memory ----
enum class MemoryKind { Pageable, Pinned, Device };
struct PointerInfo {
  MemoryKind kind = MemoryKind::Pageable;
  int device = -1;              // Device memory: its device
  const void* base = nullptr;   // Device and Pinned: the allocation
  size_t bytes = 0;
};
PointerInfo locate(const void* p);
// Fails (returns false and says why in *why) unless [p, p + bytes) lies inside one allocation of
// kind `kind` (Pageable accepts any host memory that is not device memory).
bool check_range(const void* p, size_t bytes, MemoryKind kind, std::string* why);

// ---- streams ----
// A byte range an operation reads or writes, for the stream-order check (order_check.h).
struct Touch {
  const void* data = nullptr;
  size_t bytes = 0;
  bool write = false;
};

// Enqueues `work` on `stream` (0 and cudaStreamLegacy: the current device's legacy default
// stream, with its implicit ordering). It runs on the stream's worker, in stream order, with
// device memory readable; a non-empty string it returns is a fault: the device's error becomes
// sticky (cudaErrorLaunchFailure) and the message is printed. `touches` are checked against
// the other streams' work now, at enqueue time: an unordered access is such a fault too.
cudaError_t enqueue(cudaStream_t stream, const char* what, std::function<std::string()> work,
                    const std::vector<Touch>& touches = {});
// The device a stream belongs to (-1 for an unknown handle).
int stream_device(cudaStream_t stream);
// The host waits until `stream` ran everything enqueued so far (counted as a host sync).
cudaError_t synchronize_stream(cudaStream_t stream);

// ---- errors and counters ----
// Records `error` as this thread's last error and returns it.
cudaError_t set_last_error(cudaError_t error);
cudaError_t take_last_error();  // cudaGetLastError: returns and clears it
cudaError_t peek_last_error();
// The sticky fault of the current device, or cudaSuccess.
cudaError_t sticky_error();
// Host synchronisations so far: sync calls, synchronous copies, each distinct point polled.
uint64_t host_syncs();
// Prints one line "dsx emulated GPU: ..." to stderr.
void say(const std::string& message);

}  // namespace dsx::emu
