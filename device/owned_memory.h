// Memory that one owner keeps for its lifetime - set-up device memory (Device::allocate_now) or
// pinned host memory (Device::allocate_pinned) - given back when the owner goes, however its
// constructor or its life ends. Stream-ordered buffers are zero/memory.h's Buffer.
#pragma once

#include <cstddef>
#include <utility>

#include "device/device.h"
#include "dsx/error.h"

namespace dsx::device {

class OwnedMemory {
 public:
  enum class Kind { Device, Pinned };

  OwnedMemory() = default;
  OwnedMemory(Device& device, Kind kind, size_t bytes)
      : device_(&device),
        kind_(kind),
        bytes_(bytes),
        data_(kind == Kind::Device ? device.allocate_now(bytes) : device.allocate_pinned(bytes)) {}
  OwnedMemory(OwnedMemory&& other) noexcept { *this = std::move(other); }
  OwnedMemory& operator=(OwnedMemory&& other) noexcept {
    if (this != &other) {
      reset();
      device_ = std::exchange(other.device_, nullptr);
      kind_ = other.kind_;
      bytes_ = std::exchange(other.bytes_, 0);
      data_ = std::exchange(other.data_, nullptr);
    }
    return *this;
  }
  OwnedMemory(const OwnedMemory&) = delete;
  OwnedMemory& operator=(const OwnedMemory&) = delete;
  ~OwnedMemory() { reset(); }

  void* get() const { return data_; }
  template <class T>
  T* as() const {
    return static_cast<T*>(data_);
  }
  size_t bytes() const { return bytes_; }

  // Gives the memory back now; every stream that used it must be ordered before this.
  void reset() noexcept {
    if (!data_) return;
    try {
      kind_ == Kind::Device ? device_->free_now(data_) : device_->free_pinned(data_);
    } catch (const Error&) {
      // A device that failed keeps the memory until the process ends; nothing else can be done.
    }
    data_ = nullptr;
    bytes_ = 0;
  }

 private:
  Device* device_ = nullptr;
  Kind kind_ = Kind::Device;
  size_t bytes_ = 0;
  void* data_ = nullptr;
};

}  // namespace dsx::device
