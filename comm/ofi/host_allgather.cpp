// Allgather through shared-memory segments (see host_segments.h). Every rank's input is cut into
// chunks of the segment's chunk size; in round k rank r copies its chunk k into its slot
// (r, k, 0) (-> posted), then every peer q's slot (q, k, 0) into block q of its output, and its
// own chunk into block r unless the input already is that block (-> consumed). A slot is reused
// `depth` rounds later, once every peer has consumed the round that used it.
#include <algorithm>
#include <cstring>
#include <vector>

#include "comm/ofi/host_in_place.h"
#include "comm/ofi/host_segments.h"

namespace dsx::comm::ofi {

void host_allgather(HostSegments& seg, const HostSegments::KeepAlive& keep_alive, const void* input, void* output,
                    size_t bytes, size_t in_place_bytes) {
  const int p = seg.size(), r = seg.rank();
  if (bytes * static_cast<size_t>(p) >= in_place_bytes) {
    const std::vector<char*> inputs = seg.map_buffers(const_cast<void*>(input), bytes, keep_alive);
    if (!inputs.empty()) {
      in_place_allgather(seg, keep_alive, inputs, output, bytes);
      return;
    }
  }
  const auto* in = static_cast<const char*>(input);
  auto* out = static_cast<char*>(output);
  char* mine = out + static_cast<size_t>(r) * bytes;
  const size_t chunk = seg.chunk_bytes();
  const size_t rounds = (bytes + chunk - 1) / chunk;
  const uint64_t base = seg.rounds_done;

  for (size_t k = 0; k < rounds; ++k) {
    const uint64_t round = base + k;
    const size_t first = k * chunk, n = std::min(chunk, bytes - first);
    seg.wait_for_free_slot(round, keep_alive);
    std::memcpy(seg.slot(r, round, 0), in + first, n);
    seg.publish(HostSegments::kPosted, round + 1);
    if (in != mine) std::memmove(mine + first, in + first, n);
    for (int q = 0; q < p; ++q) {
      if (q == r) continue;
      seg.wait(q, HostSegments::kPosted, round + 1, keep_alive, "its share of the output");
      std::memcpy(out + static_cast<size_t>(q) * bytes + first, seg.slot(q, round, 0), n);
    }
    seg.publish(HostSegments::kConsumed, round + 1);
  }
  seg.rounds_done = base + rounds;
}

}  // namespace dsx::comm::ofi
