// Pipelined chain broadcast: root -> root+1 -> ... -> root-1, chunk by chunk. Each rank forwards
// a chunk as soon as it arrives, so for large buffers every link carries the data once and the
// time approaches size / bandwidth; small buffers pay p-1 hops of latency.
#include <vector>

#include "comm/algorithms/algorithms.h"

namespace dsx::comm::algorithms {

void chain_broadcast(Transport& t, void* data, size_t bytes, int root, const Pipeline& pipe) {
  const int p = t.size(), r = t.rank();
  if (p == 1 || bytes == 0) return;
  const int position = (r - root + p) % p;
  const int next = (r + 1) % p, prev = (r - 1 + p) % p;
  const bool forwards = position < p - 1;
  size_t chunk = std::max<size_t>(pipe.chunk_bytes, (bytes + kMaxMessageIndex - 1) / kMaxMessageIndex);
  const size_t chunks = (bytes + chunk - 1) / chunk;
  auto* base = static_cast<char*>(data);
  auto length = [&](size_t k) { return std::min(chunk, bytes - k * chunk); };

  std::vector<RequestId> sends;
  if (position == 0) {
    for (size_t k = 0; k < chunks; ++k) sends.push_back(t.send(next, base + k * chunk, length(k), static_cast<uint32_t>(k)));
  } else {
    const size_t window = static_cast<size_t>(pipe.window);
    std::vector<RequestId> recvs(chunks);
    auto post = [&](size_t k) {
      if (k < chunks) recvs[k] = t.recv(prev, base + k * chunk, length(k), static_cast<uint32_t>(k));
    };
    for (size_t k = 0; k < window; ++k) post(k);
    for (size_t k = 0; k < chunks; ++k) {
      t.wait(recvs[k]);
      if (forwards) sends.push_back(t.send(next, base + k * chunk, length(k), static_cast<uint32_t>(k)));
      post(k + window);
    }
  }
  for (RequestId id : sends) t.wait(id);
}

}  // namespace dsx::comm::algorithms
