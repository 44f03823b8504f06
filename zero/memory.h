// Host buffers that ZeRO owns, counted by kind, so that memory_breakdown reports (and tests check)
// exactly how many bytes of parameters, gradients, optimizer state and transient buffers a rank
// holds. Every byte ZeRO allocates goes through a MemoryLedger; the model's activations are
// charged to it too, so that a limit (a GPU's memory, or `dsx train --device_memory`) sees the
// whole rank and an allocation beyond it fails as cudaMalloc would: Error(OutOfMemory).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "device/device.h"

namespace dsx::zero {

enum class MemoryKind { Params, Grads, OptimizerState, Buffers, Activations };
inline constexpr std::array<MemoryKind, 5> kMemoryKinds = {MemoryKind::Params, MemoryKind::Grads,
                                                           MemoryKind::OptimizerState, MemoryKind::Buffers,
                                                           MemoryKind::Activations};
const char* memory_kind_name(MemoryKind kind);

class MemoryLedger {
 public:
  // Throws Error(OutOfMemory) and counts nothing when the total would pass the limit.
  void add(MemoryKind kind, size_t bytes);
  void remove(MemoryKind kind, size_t bytes);
  size_t bytes(MemoryKind kind) const { return current_[static_cast<int>(kind)]; }
  size_t peak(MemoryKind kind) const { return peak_[static_cast<int>(kind)]; }
  size_t total() const;
  size_t peak_total() const { return peak_total_; }  // the most held at once, all kinds
  void set_limit(size_t bytes) { limit_ = bytes; }   // 0: no limit
  // One line per kind, e.g. "params 1.20 MB (peak 1.20 MB)".
  std::string report() const;

 private:
  std::array<size_t, kMemoryKinds.size()> current_{};
  std::array<size_t, kMemoryKinds.size()> peak_{};
  size_t peak_total_ = 0;
  size_t limit_ = 0;
};

// A zero-initialised array of T on a device, counted in a ledger while it lives: allocated and
// freed in the order of a stream, as cudaMallocAsync/cudaFreeAsync.
template <typename T>
class Buffer {
 public:
  Buffer() = default;
  // Usable by `stream` at once, by other streams once they wait for an event recorded on it
  // after this; freed in the order of `stream` (or of the one given to reset()).
  Buffer(device::Device& device, device::Stream& stream, MemoryLedger& ledger, MemoryKind kind, size_t count);
  Buffer(Buffer&& other) noexcept { *this = std::move(other); }
  Buffer& operator=(Buffer&& other) noexcept;
  ~Buffer() { reset(); }

  T* data() { return data_; }
  const T* data() const { return data_; }
  size_t size() const { return count_; }
  size_t bytes() const { return count_ * sizeof(T); }
  bool empty() const { return count_ == 0; }
  T& operator[](size_t i) { return data_[i]; }
  const T& operator[](size_t i) const { return data_[i]; }
  // Frees the memory once `stream` reached this point (device buffers; the stream given at
  // allocation when none is given): the last stream that uses it, or one ordered after it.
  void reset(device::Stream& stream);
  void reset();

 private:
  T* data_ = nullptr;
  size_t count_ = 0;
  MemoryLedger* ledger_ = nullptr;
  MemoryKind kind_ = MemoryKind::Buffers;
  device::Device* device_ = nullptr;
  device::Stream* stream_ = nullptr;
};

// Where a device keeps a buffer of this kind: buffers collectives read are Communicated.
device::Placement placement_of(MemoryKind kind);

template <typename T>
Buffer<T>::Buffer(device::Device& device, device::Stream& stream, MemoryLedger& ledger, MemoryKind kind,
                  size_t count)
    : ledger_(&ledger), kind_(kind), device_(&device), stream_(&stream) {
  ledger.add(kind, count * sizeof(T));
  try {
    data_ = static_cast<T*>(device.allocate(count * sizeof(T), placement_of(kind), stream));
  } catch (...) {
    ledger.remove(kind, count * sizeof(T));
    throw;
  }
  count_ = count;
}

template <typename T>
Buffer<T>& Buffer<T>::operator=(Buffer&& other) noexcept {
  if (this != &other) {
    reset();
    data_ = other.data_;
    count_ = other.count_;
    ledger_ = other.ledger_;
    kind_ = other.kind_;
    device_ = other.device_;
    stream_ = other.stream_;
    other.data_ = nullptr;
    other.count_ = 0;
    other.ledger_ = nullptr;
    other.device_ = nullptr;
  }
  return *this;
}

template <typename T>
void Buffer<T>::reset(device::Stream& stream) {
  if (!device_) {
    reset();
    return;
  }
  if (ledger_) ledger_->remove(kind_, count_ * sizeof(T));
  device_->free(data_, count_ * sizeof(T), stream);
  data_ = nullptr;
  count_ = 0;
  ledger_ = nullptr;
  device_ = nullptr;
}

template <typename T>
void Buffer<T>::reset() {
  if (device_) reset(*stream_);  // else empty: made by the default constructor or moved from
}

}  // namespace dsx::zero
