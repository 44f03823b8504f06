// The allgather of updated partitions at stages 1/2 (see partition_allgather.h).
#include "zero/partition_allgather.h"

#include <algorithm>
#include <cstring>

namespace dsx::zero {

AllgatherPlan plan_allgather(const FlatPartition& flat, size_t allgather_bucket_size) {
  const size_t S = flat.partition_numel();
  const size_t world = static_cast<size_t>(flat.world_size());
  if (world == 1 || S * world <= allgather_bucket_size) return {S, 1};
  size_t shard = allgather_bucket_size / world;
  shard = std::max<size_t>(2, shard - shard % 2);  // shards start on 4-byte boundaries of 16-bit data
  return {shard, (S + shard - 1) / shard};
}

void allgather_partitions(const FlatPartition& flat, const AllgatherPlan& plan, float* full,
                          comm::Communicator& comm, MemoryLedger& ledger, std::chrono::milliseconds timeout) {
  const size_t S = flat.partition_numel();
  const size_t rank = static_cast<size_t>(comm.rank());
  const size_t world = static_cast<size_t>(comm.size());
  if (plan.in_place()) {
    comm.allgather(full + rank * S, full, S, kernels::DType::F32)->wait(timeout);
    return;
  }
  Buffer<float> staging[2] = {Buffer<float>(ledger, MemoryKind::Buffers, world * plan.shard),
                              Buffer<float>(ledger, MemoryKind::Buffers, world * plan.shard)};
  auto count_of = [&](size_t j) { return std::min(plan.shard, S - j * plan.shard); };
  auto launch = [&](size_t j) {
    const size_t count = count_of(j);
    float* buf = staging[j % 2].data();
    std::memcpy(buf + rank * count, full + rank * S + j * plan.shard, count * sizeof(float));
    return comm.allgather(buf + rank * count, buf, count, kernels::DType::F32);
  };
  comm::WorkHandle work = launch(0);
  comm::WorkHandle next;
  try {
    for (size_t j = 0; j < plan.shards; ++j) {
      next = j + 1 < plan.shards ? launch(j + 1) : nullptr;
      work->wait(timeout);
      const size_t count = count_of(j);
      const float* buf = staging[j % 2].data();
      for (size_t r = 0; r < world; ++r) {
        if (r != rank) std::memcpy(full + r * S + j * plan.shard, buf + r * count, count * sizeof(float));
      }
      work = std::move(next);
    }
  } catch (...) {
    // The next gather may still be writing into a staging buffer: let it land before it goes.
    try {
      if (next && !next->done()) next->wait(timeout);
    } catch (...) {
      // the first failure is the one to report
    }
    throw;
  }
}

}  // namespace dsx::zero
