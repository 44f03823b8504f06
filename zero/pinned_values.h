// A few host values the device copies into without staging (device::Device::allocate_pinned):
// the step's scalars (the sum of squares, per-tensor sums) reach the host by an asynchronous copy,
// so reading them costs the one wait the host makes per step, and no second one for the copy.
#pragma once

#include <cstddef>
#include <utility>

#include "device/device.h"

namespace dsx::zero {

template <typename T>
class PinnedValues {
 public:
  PinnedValues() = default;
  PinnedValues(device::Device& device, size_t count)
      : device_(&device),
        data_(static_cast<T*>(device.allocate_pinned(count * sizeof(T)))),
        count_(count) {}
  ~PinnedValues() {
    if (data_) device_->free_pinned(data_);
  }
  PinnedValues(const PinnedValues&) = delete;
  PinnedValues& operator=(PinnedValues&& other) noexcept {
    std::swap(device_, other.device_);
    std::swap(data_, other.data_);
    std::swap(count_, other.count_);
    return *this;
  }
  T* data() { return data_; }
  size_t size() const { return count_; }

 private:
  device::Device* device_ = nullptr;
  T* data_ = nullptr;
  size_t count_ = 0;
};

}  // namespace dsx::zero
