// Dissemination barrier (Hensgen, Finkel, Manber): in round i rank r signals rank r + 2^i and
// waits for rank r - 2^i. After ceil(log2 p) rounds every rank has heard, directly or through
// others, from every rank, so nobody leaves before everybody has arrived.
#include "comm/algorithms/algorithms.h"

namespace dsx::comm::algorithms {

void dissemination_barrier(Transport& t) {
  const int p = t.size(), r = t.rank();
  auto* token = static_cast<char*>(t.scratch(2));  // [0] sent, [1] received
  token[0] = 1;
  uint32_t round = 0;
  for (int distance = 1; distance < p; distance *= 2, ++round) {
    RequestId in = t.recv((r - distance + p) % p, token + 1, 1, round);
    RequestId out = t.send((r + distance) % p, token, 1, round);
    t.wait(in);
    t.wait(out);
  }
}

}  // namespace dsx::comm::algorithms
