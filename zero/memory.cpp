// Counted, aligned host allocations for ZeRO's buffers.
#include "zero/memory.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "dsx/error.h"

namespace dsx::zero {

const char* memory_kind_name(MemoryKind kind) {
  switch (kind) {
    case MemoryKind::Params: return "params";
    case MemoryKind::Grads: return "grads";
    case MemoryKind::OptimizerState: return "optimizer_state";
    case MemoryKind::Buffers: return "buffers";
  }
  return "?";
}

void MemoryLedger::add(MemoryKind kind, size_t bytes) {
  auto i = static_cast<int>(kind);
  current_[i] += bytes;
  if (current_[i] > peak_[i]) peak_[i] = current_[i];
}

void MemoryLedger::remove(MemoryKind kind, size_t bytes) { current_[static_cast<int>(kind)] -= bytes; }

size_t MemoryLedger::total() const {
  size_t sum = 0;
  for (size_t b : current_) sum += b;
  return sum;
}

std::string MemoryLedger::report() const {
  std::string out;
  char line[128];
  for (MemoryKind kind : kMemoryKinds) {
    std::snprintf(line, sizeof line, "%s %.2f MB (peak %.2f MB)", memory_kind_name(kind), bytes(kind) / 1e6,
                  peak(kind) / 1e6);
    if (!out.empty()) out += ", ";
    out += line;
  }
  return out;
}

void* aligned_zeroed_alloc(size_t bytes) {
  if (bytes == 0) return nullptr;
  const size_t rounded = (bytes + 63) / 64 * 64;
  void* p = std::aligned_alloc(64, rounded);
  if (!p) {
    throw Error(ErrorKind::Io, "out of host memory allocating " + std::to_string(bytes) +
                                   " bytes; use a higher ZeRO stage, more ranks, or a smaller model/batch");
  }
  std::memset(p, 0, rounded);
  return p;
}

void aligned_free(void* p) { std::free(p); }

}  // namespace dsx::zero
