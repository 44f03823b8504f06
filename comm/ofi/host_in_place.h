// Collectives over buffers that every rank of the group has in shared host memory
// (comm/host_memory.h), mapped here by HostSegments::map_buffers: each rank reads its peers'
// buffers where they lie, so no data goes through the staging slots. Rank r alone works on block
// r of every buffer; map_buffers is the start line, and a rank returns only once every peer has
// finished with its buffers (one round of the segments' counters).
#pragma once

#include <algorithm>
#include <cstddef>
#include <vector>

#include "comm/ofi/host_segments.h"

namespace dsx::comm::ofi {

// `count` elements cut into `ranks` blocks, the first count % ranks of them one element longer,
// each cut into chunks of `chunk` elements.
struct Blocks {
  size_t count;
  size_t ranks;
  size_t chunk;
  size_t length(int b) const { return count / ranks + (static_cast<size_t>(b) < count % ranks ? 1 : 0); }
  size_t offset(int b) const {
    auto ub = static_cast<size_t>(b);
    return ub * (count / ranks) + std::min(ub, count % ranks);
  }
  // Elements [first, first + n) of chunk k of block b; n may be 0 for short blocks.
  size_t first(int b, size_t k) const { return offset(b) + k * chunk; }
  size_t n(int b, size_t k) const {
    size_t len = length(b);
    return k * chunk >= len ? 0 : std::min(chunk, len - k * chunk);
  }
};

// `buffers[q]`: rank q's buffer as mapped here (this rank's own at index rank()).
void in_place_allreduce(HostSegments& seg, const HostSegments::KeepAlive& keep_alive, const std::vector<char*>& buffers,
                        size_t count, kernels::DType dtype, kernels::ReduceOp op);
// `inputs[q]`: rank q's input (size() blocks of `count`); this rank's block goes to `output`.
void in_place_reduce_scatter(HostSegments& seg, const HostSegments::KeepAlive& keep_alive,
                             const std::vector<char*>& inputs, void* output, size_t count, kernels::DType dtype,
                             kernels::ReduceOp op);
// `inputs[q]`: rank q's `bytes`; `output` gets them all in rank order.
void in_place_allgather(HostSegments& seg, const HostSegments::KeepAlive& keep_alive, const std::vector<char*>& inputs,
                        void* output, size_t bytes);

}  // namespace dsx::comm::ofi
