// How the ring algorithms cut a buffer: p blocks (the first count % p one element longer), each
// sent in chunks; and how a (step, chunk) pair becomes a message index.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "comm/algorithms/transport.h"
#include "dsx/error.h"

namespace dsx::comm::algorithms {

struct RingGeometry {
  size_t count;       // elements in the whole buffer
  int ranks;
  size_t chunk_elems; // elements per chunk
  size_t max_chunks;  // chunks of the longest block

  // `steps` = how many ring steps the algorithm runs (message indices step * max_chunks + chunk).
  RingGeometry(size_t count_, int ranks_, size_t elem_size, size_t chunk_bytes, int steps)
      : count(count_), ranks(ranks_) {
    size_t longest = block_length(0);
    chunk_elems = std::max<size_t>(1, chunk_bytes / elem_size);
    // Very large buffers: grow the chunk until every message index fits in the tag.
    size_t limit = kMaxMessageIndex / static_cast<size_t>(std::max(steps, 1));
    chunk_elems = std::max(chunk_elems, (longest + limit - 1) / limit);
    max_chunks = (longest + chunk_elems - 1) / chunk_elems;
  }

  static int wrap(int b, int p) { return ((b % p) + p) % p; }
  size_t block_length(int b) const {
    return count / static_cast<size_t>(ranks) + (static_cast<size_t>(b) < count % static_cast<size_t>(ranks) ? 1 : 0);
  }
  size_t block_offset(int b) const {
    auto ub = static_cast<size_t>(b);
    return ub * (count / static_cast<size_t>(ranks)) + std::min(ub, count % static_cast<size_t>(ranks));
  }
  size_t chunks(int b) const { return (block_length(b) + chunk_elems - 1) / chunk_elems; }
  // Element range [first, first + length) of chunk k of block b.
  size_t chunk_offset(int b, size_t k) const { return block_offset(b) + k * chunk_elems; }
  size_t chunk_length(int b, size_t k) const { return std::min(chunk_elems, block_length(b) - k * chunk_elems); }
  uint32_t index(int step, size_t k) const {
    return static_cast<uint32_t>(static_cast<size_t>(step) * max_chunks + k);
  }
};

}  // namespace dsx::comm::algorithms
