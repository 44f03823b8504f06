// Recursive-doubling allreduce, for small buffers where latency, not bandwidth, sets the time:
// log2(p) rounds instead of the ring's 2(p-1). In round i rank r swaps its whole buffer with
// rank r XOR 2^i and both add the two; both then hold the same partial sum, so after the last
// round everyone holds the total, bit for bit alike (a + b == b + a in IEEE arithmetic).
//
// When p is not a power of two, the ranks above the largest power of two q first hand their
// buffer to rank r - q (which folds it in), sit out the rounds, and get the result back at the end.
#include <cstring>

#include "comm/algorithms/algorithms.h"

namespace dsx::comm::algorithms {

void recursive_doubling_allreduce(Transport& t, void* data, size_t count, DType dtype, ReduceOp op) {
  const int p = t.size(), r = t.rank();
  if (p == 1 || count == 0) return;
  const size_t bytes = count * kernels::dtype_size(dtype);
  void* incoming = t.scratch(bytes);
  int q = 1;
  while (q * 2 <= p) q *= 2;
  uint32_t index = 0;

  // Fold the ranks beyond q into their partners.
  if (r >= q) {
    t.wait(t.send(r - q, data, bytes, index));
    t.wait(t.recv(r - q, data, bytes, index + 1));
    return;
  }
  if (r + q < p) {
    t.wait(t.recv(r + q, incoming, bytes, index));
    kernels::reduce_into(dtype, op, data, incoming, count);
  }
  // Exchange whole buffers with partners at distance 1, 2, 4, ...
  uint32_t round_index = index + 2;
  for (int distance = 1; distance < q; distance *= 2, ++round_index) {
    int partner = r ^ distance;
    RequestId in = t.recv(partner, incoming, bytes, round_index);
    RequestId out = t.send(partner, data, bytes, round_index);
    t.wait(in);
    t.wait(out);  // the send reads `data`: it must finish before we add into it
    kernels::reduce_into(dtype, op, data, incoming, count);
  }
  if (op == ReduceOp::Avg) kernels::scale(dtype, data, 1.0f / static_cast<float>(p), count);
  if (r + q < p) t.wait(t.send(r + q, data, bytes, index + 1));
}

}  // namespace dsx::comm::algorithms
