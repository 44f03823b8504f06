// A CUDA model's device memory: `n` elements of T from the model's device (Device::allocate_now),
// kept for the model's life and given back with it. Zero-filled, as allocate_now gives it.
#pragma once

#include <cstddef>

#include "device/owned_memory.h"

namespace dsx::models {

template <class T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(device::Device& gpu, size_t n) : memory_(gpu, device::OwnedMemory::Kind::Device, n * sizeof(T)), size_(n) {}
  T* data() const { return memory_.as<T>(); }
  size_t size() const { return size_; }
  size_t bytes() const { return size_ * sizeof(T); }

 private:
  device::OwnedMemory memory_;
  size_t size_ = 0;
};

}  // namespace dsx::models
