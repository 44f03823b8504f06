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

// A zero-initialised, 64-byte aligned host array of T, counted in a ledger while it lives.
template <typename T>
class Buffer {
 public:
  Buffer() = default;
  Buffer(MemoryLedger& ledger, MemoryKind kind, size_t count);
  Buffer(Buffer&& other) noexcept { *this = std::move(other); }
  Buffer& operator=(Buffer&& other) noexcept;
  ~Buffer() { reset(); }

  T* data() { return data_.get(); }
  const T* data() const { return data_.get(); }
  size_t size() const { return count_; }
  bool empty() const { return count_ == 0; }
  T& operator[](size_t i) { return data_[i]; }
  const T& operator[](size_t i) const { return data_[i]; }
  void reset();

 private:
  struct Free {
    void operator()(T* p) const;
  };
  std::unique_ptr<T[], Free> data_;
  size_t count_ = 0;
  MemoryLedger* ledger_ = nullptr;
  MemoryKind kind_ = MemoryKind::Buffers;
};

// Throws dsx::Error on failure, naming the size. Buffers that collectives read (every kind but
// optimizer state and activations), when large enough to be read in place, come from the
// communicator's shared host memory (comm/host_memory.h), so that the ranks of a host reduce
// them without copies through staging slots.
void* aligned_zeroed_alloc(size_t bytes, MemoryKind kind);
void aligned_free(void* p);

template <typename T>
Buffer<T>::Buffer(MemoryLedger& ledger, MemoryKind kind, size_t count) : ledger_(&ledger), kind_(kind) {
  ledger.add(kind, count * sizeof(T));  // first: over the limit, nothing is allocated
  try {
    data_.reset(static_cast<T*>(aligned_zeroed_alloc(count * sizeof(T), kind)));
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
    data_ = std::move(other.data_);
    count_ = other.count_;
    ledger_ = other.ledger_;
    kind_ = other.kind_;
    other.count_ = 0;
    other.ledger_ = nullptr;
  }
  return *this;
}

template <typename T>
void Buffer<T>::reset() {
  if (ledger_) ledger_->remove(kind_, count_ * sizeof(T));
  data_.reset();
  count_ = 0;
  ledger_ = nullptr;
}

template <typename T>
void Buffer<T>::Free::operator()(T* p) const {
  aligned_free(p);
}

}  // namespace dsx::zero
