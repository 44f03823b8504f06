// Ring reduce-scatter: rank r ends with block r of the input, reduced over all ranks.
//
// In step s (0..p-2) rank r sends the partial sum of block r-s-1 to its right neighbour and
// receives the partial sum of block r-s-2 from its left, adds its own input block to it and, in
// the next step, sends that on. The last block to arrive is block r itself, which is added into
// the output. The input is never written; partial sums live in scratch slots, each reused only
// after the send that read it has finished. Chunked, so a chunk is forwarded as soon as it is
// reduced.
#include <cstring>
#include <vector>

#include "comm/algorithms/algorithms.h"
#include "comm/algorithms/ring_geometry.h"

namespace dsx::comm::algorithms {

namespace {
constexpr RequestId kNone = ~RequestId{0};
}

void ring_reduce_scatter(Transport& t, const void* input, void* output, size_t count, DType dtype, ReduceOp op,
                         const Pipeline& pipe) {
  const int p = t.size(), r = t.rank();
  const size_t esize = kernels::dtype_size(dtype);
  const auto* in = static_cast<const char*>(input);
  auto* out = static_cast<char*>(output);
  if (out != in + static_cast<size_t>(r) * count * esize) {
    std::memmove(out, in + static_cast<size_t>(r) * count * esize, count * esize);
  }
  if (p == 1 || count == 0) {
    if (op == ReduceOp::Avg) kernels::scale(dtype, out, 1.0f / static_cast<float>(p), count);
    return;
  }
  const RingGeometry g(count * static_cast<size_t>(p), p, esize, pipe.chunk_bytes, p - 1);
  const int right = RingGeometry::wrap(r + 1, p), left = RingGeometry::wrap(r - 1, p);
  auto input_at = [&](int block, size_t k) { return in + g.chunk_offset(block, k) * esize; };
  auto bytes = [&](int block, size_t k) { return g.chunk_length(block, k) * esize; };

  const size_t chunks = g.chunks(0);  // every block has `count` elements
  const size_t total = static_cast<size_t>(p - 1) * chunks;
  const size_t window = static_cast<size_t>(pipe.window);
  const size_t slot_bytes = g.chunk_elems * esize;
  char* slots = static_cast<char*>(t.scratch(window * slot_bytes));
  std::vector<RequestId> slot_send(window, kNone), recvs(total, kNone), first_sends;

  // Message m from the left is step m / chunks, chunk m % chunks, of block r - step - 2.
  auto post = [&](size_t m) {
    if (m >= total) return;
    RequestId& busy = slot_send[m % window];
    if (busy != kNone) t.wait(busy);
    busy = kNone;
    int s = static_cast<int>(m / chunks);
    size_t k = m % chunks;
    recvs[m] = t.recv(left, slots + (m % window) * slot_bytes, bytes(RingGeometry::wrap(r - s - 2, p), k), g.index(s, k));
  };

  for (size_t m = 0; m < window; ++m) post(m);
  int first = RingGeometry::wrap(r - 1, p);
  for (size_t k = 0; k < chunks; ++k) first_sends.push_back(t.send(right, input_at(first, k), bytes(first, k), g.index(0, k)));
  for (size_t m = 0; m < total; ++m) {
    t.wait(recvs[m]);
    int s = static_cast<int>(m / chunks);
    size_t k = m % chunks;
    int b = RingGeometry::wrap(r - s - 2, p);
    char* slot = slots + (m % window) * slot_bytes;
    size_t n = g.chunk_length(b, k);
    if (s < p - 2) {
      kernels::reduce_into(dtype, op, slot, input_at(b, k), n);
      slot_send[m % window] = t.send(right, slot, n * esize, g.index(s + 1, k));
    } else {
      kernels::reduce_into(dtype, op, out + k * g.chunk_elems * esize, slot, n);
    }
    post(m + window);
  }
  for (RequestId id : slot_send) {
    if (id != kNone) t.wait(id);
  }
  for (RequestId id : first_sends) t.wait(id);
  if (op == ReduceOp::Avg) kernels::scale(dtype, out, 1.0f / static_cast<float>(p), count);
}

}  // namespace dsx::comm::algorithms
