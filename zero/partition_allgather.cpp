// The allgather of updated partitions at stages 1/2 (see partition_allgather.h).
#include "zero/partition_allgather.h"

#include <algorithm>

namespace dsx::zero {

AllgatherPlan plan_allgather(const FlatPartition& flat, size_t allgather_bucket_size) {
  const size_t S = flat.partition_numel();
  const size_t world = static_cast<size_t>(flat.world_size());
  if (world == 1 || S * world <= allgather_bucket_size) return {S, 1};
  size_t shard = allgather_bucket_size / world;
  shard = std::max<size_t>(2, shard - shard % 2);  // shards start on 4-byte boundaries of 16-bit data
  return {shard, (S + shard - 1) / shard};
}

void allgather_partitions(const FlatPartition& flat, const AllgatherPlan& plan, float* full, ZeroContext& ctx) {
  const size_t S = flat.partition_numel();
  const size_t rank = static_cast<size_t>(ctx.comm.rank());
  const size_t world = static_cast<size_t>(ctx.comm.size());
  device::Stream& stream = ctx.comm_stream;
  if (plan.in_place()) {
    ctx.comm.allgather_on(ctx.device, stream, full + rank * S, full, S, kernels::DType::F32);
    return;
  }
  Buffer<float> staging[2] = {ctx.buffer<float>(MemoryKind::Buffers, world * plan.shard, stream),
                              ctx.buffer<float>(MemoryKind::Buffers, world * plan.shard, stream)};
  for (size_t j = 0; j < plan.shards; ++j) {
    const size_t count = std::min(plan.shard, S - j * plan.shard);
    float* buf = staging[j % 2].data();
    ctx.device.copy(buf + rank * count, full + rank * S + j * plan.shard, count * sizeof(float), stream);
    ctx.comm.allgather_on(ctx.device, stream, buf + rank * count, buf, count, kernels::DType::F32);
    for (size_t r = 0; r < world; ++r) {
      if (r != rank) ctx.device.copy(full + r * S + j * plan.shard, buf + r * count, count * sizeof(float), stream);
    }
  }
  staging[0].reset(stream);
  staging[1].reset(stream);
}

}  // namespace dsx::zero
