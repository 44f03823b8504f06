// The allgather of updated partitions at stages 1/2 (see partition_allgather.h).
#include "zero/partition_allgather.h"

#include <algorithm>

namespace dsx::zero {

AllgatherPlan plan_allgather(const FlatPartition& flat, size_t allgather_bucket_size) {
  const size_t S = flat.partition_numel();
  const size_t world = static_cast<size_t>(flat.world_size());
  if (world == 1 || S * world <= allgather_bucket_size) return {S, 1};
  size_t shard = allgather_bucket_size / world;
  shard =
      std::max<size_t>(2, shard - shard % 2);  // shards start on 4-byte boundaries of 16-bit data
  return {shard, (S + shard - 1) / shard};
}

void allgather_partitions(const FlatPartition& flat, const AllgatherPlan& plan, void* full_data,
                          kernels::DType dtype, ZeroContext& ctx) {
  const size_t S = flat.partition_numel();
  const size_t rank = static_cast<size_t>(ctx.comm.rank());
  const size_t world = static_cast<size_t>(ctx.comm.size());
  const size_t e = kernels::dtype_size(dtype);
  auto* full = static_cast<uint8_t*>(full_data);
  device::Stream& stream = ctx.comm_stream;
  if (plan.in_place()) {
    ctx.comm.allgather_on(ctx.device, stream, full + rank * S * e, full, S, dtype);
    return;
  }
  Buffer<uint8_t> staging[2] = {
      ctx.buffer<uint8_t>(MemoryKind::Buffers, world * plan.shard * e, stream),
      ctx.buffer<uint8_t>(MemoryKind::Buffers, world * plan.shard * e, stream)};
  for (size_t j = 0; j < plan.shards; ++j) {
    const size_t count = std::min(plan.shard, S - j * plan.shard);
    uint8_t* buf = staging[j % 2].data();
    ctx.device.copy(buf + rank * count * e, full + (rank * S + j * plan.shard) * e, count * e,
                    stream);
    ctx.comm.allgather_on(ctx.device, stream, buf + rank * count * e, buf, count, dtype);
    for (size_t r = 0; r < world; ++r) {
      if (r != rank)
        ctx.device.copy(full + (r * S + j * plan.shard) * e, buf + r * count * e, count * e,
                        stream);
    }
  }
  staging[0].reset(stream);
  staging[1].reset(stream);
}

}  // namespace dsx::zero
