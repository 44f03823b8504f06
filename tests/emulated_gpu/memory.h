// Device memory of the emulated GPUs and pinned host memory: the allocators, the registry that
// says where a pointer lives, and the window in which device memory is readable at all.
#pragma once

#include <cstddef>
#include <functional>

#include "tests/emulated_gpu/runtime.h"

namespace dsx::emu {

// nullptr when the device's memory is full.
void* device_allocate(int device, size_t bytes);
// Returns false when `p` is not the start of a live device allocation.
bool device_free(void* p);
size_t device_used(int device);

void* pinned_allocate(size_t bytes);
bool pinned_free(void* p);

// Device memory is readable and writable from begin_device_access (stream work starting) until
// the next protect_if_idle (the host waited for the device) finds no stream work running; then a
// host access faults.
void begin_device_access();
void end_device_access();
void protect_if_idle();
template <class F>
auto with_device_access(F&& f) {
  begin_device_access();
  struct End {
    ~End() { end_device_access(); }
  } end;
  return f();
}

}  // namespace dsx::emu
