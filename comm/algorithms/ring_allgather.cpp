// Ring allgather: every rank ends with all p blocks, in rank order.
//
// Rank r first puts its own block at position r of the output. In step s (0..p-2) it sends block
// r-s to its right neighbour and receives block r-s-1 from its left straight into the output;
// the block received in step s is the one sent in step s+1, forwarded chunk by chunk as soon as
// each chunk lands. Receives are posted a window ahead so the provider never has to buffer.
#include <cstring>
#include <vector>

#include "comm/algorithms/algorithms.h"
#include "comm/algorithms/ring_geometry.h"

namespace dsx::comm::algorithms {

void ring_allgather(Transport& t, const void* input, void* output, size_t count, DType dtype, const Pipeline& pipe) {
  const int p = t.size(), r = t.rank();
  const size_t esize = kernels::dtype_size(dtype);
  auto* out = static_cast<char*>(output);
  char* mine = out + static_cast<size_t>(r) * count * esize;
  if (mine != input) std::memmove(mine, input, count * esize);
  if (p == 1 || count == 0) return;
  const RingGeometry g(count * static_cast<size_t>(p), p, esize, pipe.chunk_bytes, p - 1);
  const int right = RingGeometry::wrap(r + 1, p), left = RingGeometry::wrap(r - 1, p);
  auto at = [&](int block, size_t k) { return out + g.chunk_offset(block, k) * esize; };
  auto bytes = [&](int block, size_t k) { return g.chunk_length(block, k) * esize; };

  const size_t chunks = g.chunks(0);
  const size_t total = static_cast<size_t>(p - 1) * chunks;
  const size_t window = static_cast<size_t>(pipe.window);
  std::vector<RequestId> recvs(total), sends;
  auto post = [&](size_t m) {
    if (m >= total) return;
    int s = static_cast<int>(m / chunks);
    size_t k = m % chunks;
    int b = RingGeometry::wrap(r - s - 1, p);
    recvs[m] = t.recv(left, at(b, k), bytes(b, k), g.index(s, k));
  };

  for (size_t m = 0; m < window; ++m) post(m);
  for (size_t k = 0; k < chunks; ++k) sends.push_back(t.send(right, at(r, k), bytes(r, k), g.index(0, k)));
  for (size_t m = 0; m < total; ++m) {
    t.wait(recvs[m]);
    int s = static_cast<int>(m / chunks);
    size_t k = m % chunks;
    if (s + 1 < p - 1) {
      int b = RingGeometry::wrap(r - s - 1, p);
      sends.push_back(t.send(right, at(b, k), bytes(b, k), g.index(s + 1, k)));
    }
    post(m + window);
  }
  for (RequestId id : sends) t.wait(id);
}

}  // namespace dsx::comm::algorithms
