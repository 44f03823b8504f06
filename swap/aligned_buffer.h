// Host memory the kernel can read and write with O_DIRECT: page-aligned, its size rounded up to
// kDirectAlignment, and (pin_memory) locked in RAM with mlock so that it is never paged out while
// a transfer is in flight, as DeepSpeed's new_cpu_locked_tensor does. Locking counts against
// RLIMIT_MEMLOCK; where the limit refuses it the buffer stays unlocked (`locked()` says which),
// which O_DIRECT does not need.
#pragma once

#include <cstddef>

namespace dsx::swap {

class AlignedBuffer {
 public:
  AlignedBuffer() = default;
  AlignedBuffer(size_t bytes, bool pin_memory);
  ~AlignedBuffer();
  AlignedBuffer(AlignedBuffer&& other) noexcept;
  AlignedBuffer& operator=(AlignedBuffer&& other) noexcept;
  AlignedBuffer(const AlignedBuffer&) = delete;
  AlignedBuffer& operator=(const AlignedBuffer&) = delete;

  void* data() const { return data_; }
  template <class T>
  T* as() const {
    return static_cast<T*>(data_);
  }
  size_t bytes() const { return bytes_; }
  bool locked() const { return locked_; }

 private:
  void release();
  void* data_ = nullptr;
  size_t bytes_ = 0;
  bool locked_ = false;
};

}  // namespace dsx::swap
