// The seam between collective algorithms and a fabric (gloo's "pair"): tagged point-to-point
// messages within one group and one operation, numbered by the algorithm. A backend binds a
// Transport to each operation, so messages of different operations or groups never match, and
// wait() enforces the operation's deadline and names the peer when it runs out.
#pragma once

#include <cstddef>
#include <cstdint>

namespace dsx::comm::algorithms {

using RequestId = uint32_t;

// Message indices must stay below this (they travel in 16 bits of the tag).
inline constexpr uint32_t kMaxMessageIndex = 1u << 16;

class Transport {
 public:
  virtual ~Transport() = default;
  virtual int rank() const = 0;  // in the group
  virtual int size() const = 0;
  // `index` numbers the messages from one sender to one receiver within the operation; the
  // receiver posts the same index for the same message.
  virtual RequestId send(int peer, const void* data, size_t bytes, uint32_t index) = 0;
  virtual RequestId recv(int peer, void* data, size_t bytes, uint32_t index) = 0;
  // Blocks until the request completed; throws (naming peer and operation) on error or deadline.
  virtual void wait(RequestId request) = 0;
  // A buffer of at least `bytes` usable for transfers (registered where the fabric needs it).
  // Valid until the operation ends; each call may return the same memory.
  virtual void* scratch(size_t bytes) = 0;
};

}  // namespace dsx::comm::algorithms
