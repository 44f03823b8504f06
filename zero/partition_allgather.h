// Stages 1/2 after the optimizer step: every rank's updated partition of the flat parameter
// buffer reaches every rank's full copy (DeepSpeed's all_gather_dp_groups).
//
// When the whole buffer (N partitions of S elements) fits in allgather_bucket_size it is one
// allgather in place, which needs no buffer at all. Otherwise each partition is cut into shards
// of s elements (s even, N·s ≤ allgather_bucket_size): shard j of every rank is gathered into a
// staging buffer of N·s elements and copied to where those shards live in the flat buffer. Two
// staging buffers alternate, so that on a device whose copies run beside its collectives the
// copy of shard j can overlap the gather of shard j+1; they are counted in the ledger as buffers
// while the allgather runs. Everything runs on ZeRO's communication stream.
//
// DeepSpeed bounds its messages the other way (floor(S·N / bucket) shards, so each is at least
// the bucket) and only without all_gather_into_tensor, i.e. never with NCCL; dsx takes the
// option as a bound on the buffer and on every message.
#pragma once

#include <chrono>
#include <cstddef>

#include "zero/memory.h"
#include "zero/partition.h"
#include "zero/zero_context.h"

namespace dsx::zero {

struct AllgatherPlan {
  size_t shard = 0;   // elements of one rank's partition per allgather (the last may be shorter)
  size_t shards = 1;  // allgathers per step; 1 with shard == S: in place, no staging
  bool in_place() const { return shards == 1; }
};

AllgatherPlan plan_allgather(const FlatPartition& flat, size_t allgather_bucket_size);

// `full` is the padded flat buffer (N·S elements of `dtype`); this rank's partition is updated by
// the work enqueued so far on the communication stream (the caller orders it after the optimizer).
void allgather_partitions(const FlatPartition& flat, const AllgatherPlan& plan, void* full, kernels::DType dtype,
                          ZeroContext& context);

}  // namespace dsx::zero
