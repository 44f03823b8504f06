// The collective algorithms of the ofi backend, one per file, written against Transport. Each
// leaves identical bytes on every rank (every element is reduced once, then copied), so ranks
// never drift apart. Avg reduces like Sum and divides once at the end.
#pragma once

#include <cstddef>

#include "comm/algorithms/transport.h"
#include "kernels/dtype.h"
#include "kernels/reduce.h"

namespace dsx::comm::algorithms {

using kernels::DType;
using kernels::ReduceOp;

struct Pipeline {
  size_t chunk_bytes = size_t{512} << 10;  // a block is sent in slices of this size
  int window = 8;                        // receives posted ahead of the one being waited for
};

// Bandwidth-optimal: reduce-scatter then allgather around the ring, pipelined by chunk.
void ring_allreduce(Transport& t, void* data, size_t count, DType dtype, ReduceOp op, const Pipeline& pipe);
// Latency-optimal for small messages: log2(p) exchanges of the whole buffer.
void recursive_doubling_allreduce(Transport& t, void* data, size_t count, DType dtype, ReduceOp op);
void ring_reduce_scatter(Transport& t, const void* input, void* output, size_t count, DType dtype, ReduceOp op,
                         const Pipeline& pipe);
void ring_allgather(Transport& t, const void* input, void* output, size_t count, DType dtype, const Pipeline& pipe);
void chain_broadcast(Transport& t, void* data, size_t bytes, int root, const Pipeline& pipe);
void dissemination_barrier(Transport& t);

}  // namespace dsx::comm::algorithms
