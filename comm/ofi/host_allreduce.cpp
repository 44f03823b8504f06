// Allreduce through shared-memory segments (see host_segments.h for the idea).
//
// The buffer is cut into p blocks (the first count % p one element longer), each block into
// chunks of the segment's chunk size; round k handles chunk k of every block. In round k rank r
//   1. copies its chunk k of every other block b into slot (r, k, b)           -> posted = k+1
//   2. adds every peer q's slot (q, k, r) into its own chunk k of block r, and copies the result
//      into slot (r, k, r)                                                      -> reduced = k+1
//   3. copies every peer q's reduced chunk, slot (q, k, q), into its block q    -> consumed = k+1
// A slot is reused `depth` rounds later, once every peer has consumed the round that used it.
// Round numbers continue from one operation to the next, so the counters never go back.
// Step 1 of the next round runs before step 3 of this one, so a peer that is a little behind
// finds its input waiting. Small buffers skip all this (one_shot_allreduce).
#include <algorithm>
#include <chrono>
#include <cstring>
#include <vector>

#include "comm/ofi/host_in_place.h"
#include "comm/ofi/host_segments.h"

namespace dsx::comm::ofi {

namespace {

// Small buffers, where waiting for peers costs more than adding: every rank posts its whole
// buffer, waits once for everyone's, and adds them all up in rank order - the same operations
// in the same order on every rank, so the same bytes.
void one_shot_allreduce(HostSegments& seg, const HostSegments::KeepAlive& keep_alive, void* data, size_t count,
                        kernels::DType dtype, kernels::ReduceOp op) {
  seg.wait_for_free_slot(seg.rounds_done, keep_alive);
  one_shot_post(seg, data, count * kernels::dtype_size(dtype));
  one_shot_finish(seg, keep_alive, data, count, dtype, op);
}

}  // namespace

bool one_shot_slot_free(const HostSegments& seg) {
  const uint64_t round = seg.rounds_done;
  if (round < static_cast<uint64_t>(seg.depth())) return true;
  for (int q = 0; q < seg.size(); ++q) {
    if (q != seg.rank() && seg.progress(q, HostSegments::kConsumed) < round - seg.depth() + 1) return false;
  }
  return true;
}

void one_shot_post(HostSegments& seg, const void* data, size_t bytes) {
  const uint64_t round = seg.rounds_done;
  std::memcpy(seg.slot(seg.rank(), round, 0), data, bytes);
  seg.publish(HostSegments::kPosted, round + 1);
}

bool one_shot_peers_posted(const HostSegments& seg, std::chrono::microseconds budget) {
  const uint64_t round = seg.rounds_done;
  const auto deadline = std::chrono::steady_clock::now() + budget;
  for (int q = 0; q < seg.size(); ++q) {
    while (q != seg.rank() && seg.progress(q, HostSegments::kPosted) < round + 1) {
      if (std::chrono::steady_clock::now() > deadline) return false;
    }
  }
  return true;
}

void one_shot_finish(HostSegments& seg, const HostSegments::KeepAlive& keep_alive, void* data, size_t count,
                     kernels::DType dtype, kernels::ReduceOp op) {
  const int p = seg.size(), r = seg.rank();
  const uint64_t round = seg.rounds_done;
  for (int q = 0; q < p; ++q) {
    if (q != r) seg.wait(q, HostSegments::kPosted, round + 1, keep_alive, "its buffer");
  }
  std::memcpy(data, seg.slot(0, round, 0), count * kernels::dtype_size(dtype));
  for (int q = 1; q < p; ++q) kernels::reduce_into(dtype, op, data, seg.slot(q, round, 0), count);
  if (op == kernels::ReduceOp::Avg) kernels::scale(dtype, data, 1.0f / static_cast<float>(p), count);
  seg.publish(HostSegments::kConsumed, round + 1);
  seg.rounds_done = round + 1;
}

bool one_shot_fits(const HostSegments& seg, size_t bytes, size_t one_shot_bytes) {
  // A slot holds size() chunks side by side: room for a whole small buffer.
  return bytes <= std::min(one_shot_bytes, seg.chunk_bytes() * static_cast<size_t>(seg.size()));
}

void host_allreduce(HostSegments& seg, const HostSegments::KeepAlive& keep_alive, void* data, size_t count,
                    kernels::DType dtype, kernels::ReduceOp op, size_t one_shot_bytes, size_t in_place_bytes) {
  const int p = seg.size(), r = seg.rank();
  if (p == 1 || count == 0) return;
  const size_t esize = kernels::dtype_size(dtype);
  if (one_shot_fits(seg, count * esize, one_shot_bytes)) {
    one_shot_allreduce(seg, keep_alive, data, count, dtype, op);
    return;
  }
  if (count * esize >= in_place_bytes) {
    const std::vector<char*> buffers = seg.map_buffers(data, count * esize, keep_alive);
    if (!buffers.empty()) {
      in_place_allreduce(seg, keep_alive, buffers, count, dtype, op);
      return;
    }
  }
  const Blocks blocks{count, static_cast<size_t>(p), seg.chunk_bytes() / esize};
  const size_t rounds = (blocks.length(0) + blocks.chunk - 1) / blocks.chunk;
  const uint64_t base = seg.rounds_done;
  auto* buf = static_cast<char*>(data);
  auto at = [&](int b, size_t k) { return buf + blocks.first(b, k) * esize; };

  auto post = [&](size_t k) {
    const uint64_t round = base + k;
    seg.wait_for_free_slot(round, keep_alive);
    for (int b = 0; b < p; ++b) {
      if (b != r) std::memcpy(seg.slot(r, round, b), at(b, k), blocks.n(b, k) * esize);
    }
    seg.publish(HostSegments::kPosted, round + 1);
  };
  auto reduce = [&](size_t k) {
    const uint64_t round = base + k;
    const size_t n = blocks.n(r, k);
    for (int q = 0; q < p; ++q) {
      if (q == r) continue;
      seg.wait(q, HostSegments::kPosted, round + 1, keep_alive, "its share of our block");
      kernels::reduce_into(dtype, op, at(r, k), seg.slot(q, round, r), n);
    }
    if (op == kernels::ReduceOp::Avg) kernels::scale(dtype, at(r, k), 1.0f / static_cast<float>(p), n);
    std::memcpy(seg.slot(r, round, r), at(r, k), n * esize);
    seg.publish(HostSegments::kReduced, round + 1);
  };
  auto collect = [&](size_t k) {
    const uint64_t round = base + k;
    for (int q = 0; q < p; ++q) {
      if (q == r) continue;
      seg.wait(q, HostSegments::kReduced, round + 1, keep_alive, "its reduced block");
      std::memcpy(at(q, k), seg.slot(q, round, q), blocks.n(q, k) * esize);
    }
    seg.publish(HostSegments::kConsumed, round + 1);
  };

  post(0);
  for (size_t k = 0; k < rounds; ++k) {
    reduce(k);
    if (k + 1 < rounds) post(k + 1);
    collect(k);
  }
  seg.rounds_done = base + rounds;
}

}  // namespace dsx::comm::ofi
