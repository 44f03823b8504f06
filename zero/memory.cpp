// The memory ledger of ZeRO's buffers and where a device keeps each kind (see memory.h).
#include "zero/memory.h"

#include <cstdio>

#include "dsx/error.h"

namespace dsx::zero {

const char* memory_kind_name(MemoryKind kind) {
  switch (kind) {
    case MemoryKind::Params: return "params";
    case MemoryKind::Grads: return "grads";
    case MemoryKind::OptimizerState: return "optimizer_state";
    case MemoryKind::Buffers: return "buffers";
    case MemoryKind::Activations: return "activations";
  }
  return "?";
}

void MemoryLedger::add(MemoryKind kind, size_t bytes) {
  const size_t held = total();
  if (limit_ != 0 && held + bytes > limit_) {
    char text[320];
    std::snprintf(text, sizeof text,
                  "%.2f MB of %s would bring this rank to %.2f MB, over its %.2f MB "
                  "(holding %.2f MB); use a smaller micro-batch, a higher ZeRO stage, more ranks or "
                  "activation checkpointing",
                  bytes / 1e6, memory_kind_name(kind), (held + bytes) / 1e6, limit_ / 1e6, held / 1e6);
    throw Error(ErrorKind::OutOfMemory, text);
  }
  auto i = static_cast<int>(kind);
  current_[i] += bytes;
  if (current_[i] > peak_[i]) peak_[i] = current_[i];
  if (held + bytes > peak_total_) peak_total_ = held + bytes;
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

device::Placement placement_of(MemoryKind kind) {
  const bool communicated = kind != MemoryKind::OptimizerState && kind != MemoryKind::Activations;
  return communicated ? device::Placement::Communicated : device::Placement::Private;
}

}  // namespace dsx::zero
