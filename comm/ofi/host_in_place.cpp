// In-place collectives over shared host buffers (see host_in_place.h).
#include "comm/ofi/host_in_place.h"

#include <cstring>

namespace dsx::comm::ofi {

namespace {

// A block is reduced and written back in pieces small enough that the write-back reads the sum
// from the L1 cache.
constexpr size_t kPieceBytes = size_t{16} << 10;

// One round for the whole operation, consumed too so that the slots' reuse rule holds after it;
// then wait until no peer reads or writes this rank's buffers any more.
void finish(HostSegments& seg, const HostSegments::KeepAlive& keep_alive) {
  const uint64_t done = seg.rounds_done + 1;
  seg.publish(HostSegments::kConsumed, done);
  seg.publish(HostSegments::kReduced, done);
  for (int q = 0; q < seg.size(); ++q) {
    if (q != seg.rank()) seg.wait(q, HostSegments::kReduced, done, keep_alive, "to finish with our buffer");
  }
  seg.rounds_done = done;
  ++seg.in_place_operations;
}

// out = own block (already there when in place) op every peer's, in rank order after our own.
void reduce_block(const HostSegments& seg, const std::vector<char*>& sources, size_t offset_bytes, char* out,
                  size_t n, kernels::DType dtype, kernels::ReduceOp op) {
  const int p = seg.size(), r = seg.rank();
  for (int q = 0; q < p; ++q) {
    if (q != r) kernels::reduce_into(dtype, op, out, sources[static_cast<size_t>(q)] + offset_bytes, n);
  }
  if (op == kernels::ReduceOp::Avg) kernels::scale(dtype, out, 1.0f / static_cast<float>(p), n);
}

}  // namespace

// Each rank reads and writes its block once in every buffer: the least memory traffic an
// allreduce can have. Every element is reduced once, by its block's owner, so all ranks end
// with the same bytes.
void in_place_allreduce(HostSegments& seg, const HostSegments::KeepAlive& keep_alive, const std::vector<char*>& buffers,
                        size_t count, kernels::DType dtype, kernels::ReduceOp op) {
  const int p = seg.size(), r = seg.rank();
  const size_t esize = kernels::dtype_size(dtype);
  const Blocks blocks{count, static_cast<size_t>(p), kPieceBytes / esize};
  char* own = buffers[static_cast<size_t>(r)];
  const size_t end = blocks.offset(r) + blocks.length(r);
  for (size_t first = blocks.offset(r); first < end; first += blocks.chunk) {
    const size_t n = std::min(blocks.chunk, end - first);
    reduce_block(seg, buffers, first * esize, own + first * esize, n, dtype, op);
    for (int q = 0; q < p; ++q) {
      if (q != r) std::memcpy(buffers[static_cast<size_t>(q)] + first * esize, own + first * esize, n * esize);
    }
  }
  finish(seg, keep_alive);
}

void in_place_reduce_scatter(HostSegments& seg, const HostSegments::KeepAlive& keep_alive,
                             const std::vector<char*>& inputs, void* output, size_t count, kernels::DType dtype,
                             kernels::ReduceOp op) {
  const size_t esize = kernels::dtype_size(dtype);
  const size_t block = static_cast<size_t>(seg.rank()) * count * esize;
  auto* out = static_cast<char*>(output);
  const char* own = inputs[static_cast<size_t>(seg.rank())] + block;
  if (out != own) std::memmove(out, own, count * esize);
  const size_t piece = kPieceBytes / esize;
  for (size_t first = 0; first < count; first += piece) {
    reduce_block(seg, inputs, block + first * esize, out + first * esize, std::min(piece, count - first), dtype, op);
  }
  finish(seg, keep_alive);
}

void in_place_allgather(HostSegments& seg, const HostSegments::KeepAlive& keep_alive, const std::vector<char*>& inputs,
                        void* output, size_t bytes) {
  auto* out = static_cast<char*>(output);
  for (int q = 0; q < seg.size(); ++q) {
    char* to = out + static_cast<size_t>(q) * bytes;
    if (to != inputs[static_cast<size_t>(q)]) std::memmove(to, inputs[static_cast<size_t>(q)], bytes);
  }
  finish(seg, keep_alive);
}

}  // namespace dsx::comm::ofi
