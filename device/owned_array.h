// n elements of T in device memory that one owner keeps for its lifetime (Device::allocate_now,
// zero-filled), freed when the owner goes: the typed face of OwnedMemory for a model's
// activations, inputs and tables.
#pragma once

#include <cstddef>
#include <utility>

#include "device/owned_memory.h"

namespace dsx::device {

template <class T>
class OwnedArray {
 public:
  OwnedArray() = default;
  OwnedArray(Device& device, size_t n)
      : memory_(device, OwnedMemory::Kind::Device, n * sizeof(T)), size_(n) {}
  OwnedArray(OwnedArray&& other) noexcept
      : memory_(std::move(other.memory_)), size_(std::exchange(other.size_, 0)) {}
  OwnedArray& operator=(OwnedArray&& other) noexcept {
    memory_ = std::move(other.memory_);
    size_ = std::exchange(other.size_, 0);
    return *this;
  }

  T* data() const { return memory_.as<T>(); }
  size_t size() const { return size_; }

 private:
  OwnedMemory memory_;
  size_t size_ = 0;
};

}  // namespace dsx::device
