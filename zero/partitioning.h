// How ZeRO splits the fp32 parameters and the optimizer state among the ranks: one strategy,
// chosen once from the stage (ref/zero_and_kernels.md §1), instead of a stage test in every
// function.
//
//   Replicated (stage 0)  every rank stores and updates everything.
//   Flat (stages 1, 2)    every rank stores the whole flat buffer (padded to N equal
//                         partitions) and updates partition r; a tensor may straddle ranks.
//   Sharded (stage 3)     every tensor is cut in N shards; rank r stores and updates shard r of
//                         every tensor, packed.
//
// Everything else is derived from two lists of runs: where this rank's partition takes its
// elements from the full vector (ZeRO order), and which elements its parameter storage holds.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "zero/layout.h"
#include "zero/partition.h"
#include "zero/partition_optimizer.h"

namespace dsx::zero {

// `count` elements of the tensor at `position` (ZeRO order), from element `param_offset` of it,
// lying at element `offset` of a partition or of the storage.
struct Run {
  size_t position = 0;
  size_t param_offset = 0;
  size_t offset = 0;
  size_t count = 0;
};

class Partitioning {
 public:
  virtual ~Partitioning() = default;

  // The parameter storage every rank keeps (elements), and where its partition lies in it.
  virtual size_t storage_numel() const = 0;
  virtual size_t partition_offset(int rank) const = 0;
  virtual size_t partition_numel() const = 0;
  // The runs of rank's partition (offsets in the partition), in order.
  virtual std::vector<Run> partition_runs(int rank) const = 0;
  // The runs of rank's storage (offsets in the storage).
  virtual std::vector<Run> storage_runs(int rank) const = 0;
  // False when every rank holds everything (sums over ranks are then not needed).
  virtual bool partitioned() const { return true; }
  // The flat cut of stages 1/2 (null otherwise), for the reducer and the allgather.
  virtual const FlatPartition* flat() const { return nullptr; }
  virtual const ShardedParams* sharded() const { return nullptr; }

  // The optimizer's view of rank's partition: one segment per run.
  std::vector<Segment> segments(int rank) const;
  // rank's partition of a full vector in ZeRO order (padding zero), and back (padding dropped).
  void take(const float* full, float* partition, int rank) const;
  void scatter(const float* partition, float* full, int rank) const;

 protected:
  explicit Partitioning(const ZeroLayout& layout) : layout_(layout) {}
  const ZeroLayout& layout_;
};

// The strategy of `stage` for `world` ranks. `layout` must outlive it.
std::unique_ptr<Partitioning> make_partitioning(int stage, const ZeroLayout& layout, int world);

}  // namespace dsx::zero
