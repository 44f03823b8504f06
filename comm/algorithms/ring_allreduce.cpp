// Ring allreduce: reduce-scatter, then allgather, over the ring r -> r+1, pipelined by chunk.
//
// The buffer is cut into p blocks. In reduce-scatter step s (0..p-2) rank r sends block r-s to
// its right neighbour and receives block r-s-1 from its left, adding it into its own copy; after
// p-1 steps it holds block r+1 fully reduced. In allgather step s it sends block r+1-s and stores
// the block r-s arriving from the left. What rank r receives in one step is exactly what it sends
// in the next, so each chunk is forwarded as soon as it has been reduced: the steps overlap, and
// the pipeline costs one chunk time per step instead of one block time.
//
// Every rank sends and receives 2(p-1)/p of the buffer, the lower bound for a flat allreduce.
#include <cstring>
#include <vector>

#include "comm/algorithms/algorithms.h"
#include "comm/algorithms/ring_geometry.h"

namespace dsx::comm::algorithms {

namespace {
constexpr RequestId kNone = ~RequestId{0};
}

void ring_allreduce(Transport& t, void* data, size_t count, DType dtype, ReduceOp op, const Pipeline& pipe) {
  const int p = t.size(), r = t.rank();
  if (p == 1 || count == 0) return;
  const size_t esize = kernels::dtype_size(dtype);
  auto* base = static_cast<char*>(data);
  const int steps = 2 * (p - 1);
  const RingGeometry g(count, p, esize, pipe.chunk_bytes, steps);
  const int right = RingGeometry::wrap(r + 1, p), left = RingGeometry::wrap(r - 1, p);

  // Step s (0..steps-1): the first p-1 are reduce-scatter, the rest allgather.
  auto send_block = [&](int s) { return RingGeometry::wrap(s < p - 1 ? r - s : r + 1 - (s - (p - 1)), p); };
  auto recv_block = [&](int s) { return RingGeometry::wrap(s < p - 1 ? r - s - 1 : r - (s - (p - 1)), p); };
  auto at = [&](int block, size_t k) { return base + g.chunk_offset(block, k) * esize; };
  auto bytes = [&](int block, size_t k) { return g.chunk_length(block, k) * esize; };

  // Every message from the left, in arrival order.
  struct Message {
    int step;
    size_t chunk;
  };
  std::vector<Message> incoming;
  for (int s = 0; s < steps; ++s) {
    for (size_t k = 0; k < g.chunks(recv_block(s)); ++k) incoming.push_back({s, k});
  }
  std::vector<RequestId> sends(static_cast<size_t>(steps) * g.max_chunks, kNone);
  auto send = [&](int s, size_t k) {
    int b = send_block(s);
    sends[g.index(s, k)] = t.send(right, at(b, k), bytes(b, k), g.index(s, k));
  };

  // Reduce-scatter chunks land in a ring of scratch slots; allgather chunks go straight into the
  // buffer, but only once the send that read the same bytes (reduce-scatter step s-(p-1)) is done.
  const size_t window = static_cast<size_t>(pipe.window);
  char* slots = static_cast<char*>(t.scratch(window * g.chunk_elems * esize));
  std::vector<RequestId> recvs(incoming.size(), kNone);
  auto post = [&](size_t m) {
    if (m >= incoming.size()) return;
    auto [s, k] = incoming[m];
    int b = recv_block(s);
    if (s < p - 1) {
      recvs[m] = t.recv(left, slots + (m % window) * g.chunk_elems * esize, bytes(b, k), g.index(s, k));
    } else {
      RequestId& earlier = sends[g.index(s - (p - 1), k)];
      if (earlier != kNone) t.wait(earlier);
      earlier = kNone;
      recvs[m] = t.recv(left, at(b, k), bytes(b, k), g.index(s, k));
    }
  };

  for (size_t m = 0; m < window; ++m) post(m);
  for (size_t k = 0; k < g.chunks(send_block(0)); ++k) send(0, k);
  for (size_t m = 0; m < incoming.size(); ++m) {
    t.wait(recvs[m]);
    auto [s, k] = incoming[m];
    int b = recv_block(s);
    if (s < p - 1) {
      kernels::reduce_into(dtype, op, at(b, k), slots + (m % window) * g.chunk_elems * esize, g.chunk_length(b, k));
      if (s == p - 2 && op == ReduceOp::Avg) kernels::scale(dtype, at(b, k), 1.0f / static_cast<float>(p), g.chunk_length(b, k));
    }
    if (s + 1 < steps) send(s + 1, k);
    post(m + window);
  }
  for (RequestId id : sends) {
    if (id != kNone) t.wait(id);
  }
}

}  // namespace dsx::comm::algorithms
