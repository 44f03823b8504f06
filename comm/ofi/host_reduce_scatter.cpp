// Reduce-scatter through shared-memory segments (see host_segments.h). Rank r ends with block r
// of the input reduced over the ranks. Each block is cut into chunks of the segment's chunk size;
// in round k rank r
//   1. copies chunk k of every other rank's block b of its input into slot (r, k, b) -> posted
//   2. writes its own input's chunk k of block r, plus every peer q's slot (q, k, r), into its
//      output                                                                 -> consumed
// A slot is reused `depth` rounds later, once every peer has consumed the round that used it.
// Rank r reads only its own input's block r (and its peers' slots), so the in-place form, whose
// output is that block, needs no copy.
#include <algorithm>
#include <cstring>
#include <vector>

#include "comm/ofi/host_in_place.h"
#include "comm/ofi/host_segments.h"

namespace dsx::comm::ofi {

void host_reduce_scatter(HostSegments& seg, const HostSegments::KeepAlive& keep_alive, const void* input, void* output,
                         size_t count, kernels::DType dtype, kernels::ReduceOp op, size_t in_place_bytes) {
  const int p = seg.size(), r = seg.rank();
  const size_t esize = kernels::dtype_size(dtype);
  if (count * esize * static_cast<size_t>(p) >= in_place_bytes) {
    const std::vector<char*> inputs =
        seg.map_buffers(const_cast<void*>(input), count * esize * static_cast<size_t>(p), keep_alive);
    if (!inputs.empty()) {
      in_place_reduce_scatter(seg, keep_alive, inputs, output, count, dtype, op);
      return;
    }
  }
  const auto* in = static_cast<const char*>(input);
  auto* out = static_cast<char*>(output);
  const size_t block_bytes = count * esize;
  const char* own = in + static_cast<size_t>(r) * block_bytes;
  const size_t chunk = seg.chunk_bytes() / esize * esize;
  const size_t rounds = (block_bytes + chunk - 1) / chunk;
  const uint64_t base = seg.rounds_done;

  for (size_t k = 0; k < rounds; ++k) {
    const uint64_t round = base + k;
    const size_t first = k * chunk, bytes = std::min(chunk, block_bytes - first);
    seg.wait_for_free_slot(round, keep_alive);
    for (int b = 0; b < p; ++b) {
      if (b != r) std::memcpy(seg.slot(r, round, b), in + static_cast<size_t>(b) * block_bytes + first, bytes);
    }
    seg.publish(HostSegments::kPosted, round + 1);
    if (out + first != own + first) std::memmove(out + first, own + first, bytes);
    for (int q = 0; q < p; ++q) {
      if (q == r) continue;
      seg.wait(q, HostSegments::kPosted, round + 1, keep_alive, "its share of our block");
      kernels::reduce_into(dtype, op, out + first, seg.slot(q, round, r), bytes / esize);
    }
    if (op == kernels::ReduceOp::Avg) kernels::scale(dtype, out + first, 1.0f / static_cast<float>(p), bytes / esize);
    seg.publish(HostSegments::kConsumed, round + 1);
  }
  seg.rounds_done = base + rounds;
}

}  // namespace dsx::comm::ofi
