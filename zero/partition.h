// How ZeRO cuts parameters among data-parallel ranks, with DeepSpeed's padding rules
// (ref/zero_and_kernels.md §1.2 and §1.8). Pure index arithmetic: no buffers, no communication.
//
// Stages 1 and 2 (FlatPartition): the parameters of a group are concatenated into one flat
// buffer, zero-padded at the end to a multiple of 2·N elements, and cut into N equal contiguous
// partitions. Partition boundaries ignore parameter boundaries, so a parameter may straddle
// several ranks; padding lives in the last rank(s).
//
// Stage 3 (ShardedParams): every parameter separately is padded to a multiple of N and cut into
// N equal shards; rank r stores shard r of every parameter, packed one after another.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

namespace dsx::zero {

// A run of one parameter's elements that lies in one rank's partition.
struct Piece {
  size_t param = 0;         // index of the parameter in the group
  size_t param_offset = 0;  // first element of the run inside the parameter
  size_t flat_offset = 0;   // first element of the run in the flat buffer
  size_t count = 0;
};

class FlatPartition {
 public:
  // `alignment` is DeepSpeed's start-alignment factor: 2 elements (4 bytes of fp16).
  FlatPartition(std::span<const size_t> numels, int world_size, size_t alignment = 2);

  int world_size() const { return world_size_; }
  size_t numel() const { return numel_; }                 // real elements
  size_t padded_numel() const { return partition_ * world_size_; }
  size_t partition_numel() const { return partition_; }   // S: every rank's share
  size_t partition_begin(int rank) const { return partition_ * static_cast<size_t>(rank); }
  size_t param_offset(size_t param) const { return offsets_[param]; }
  size_t param_numel(size_t param) const { return offsets_[param + 1] - offsets_[param]; }
  size_t num_params() const { return offsets_.size() - 1; }
  // Padding elements at the end of rank's partition (DeepSpeed's groups_padding).
  size_t padding(int rank) const;
  // The runs of parameters inside [begin, end) of the flat buffer, in order.
  std::vector<Piece> pieces(size_t begin, size_t end) const;
  std::vector<Piece> pieces_of_rank(int rank) const {
    return pieces(partition_begin(rank), partition_begin(rank) + partition_);
  }

 private:
  int world_size_;
  size_t numel_;
  size_t partition_;
  std::vector<size_t> offsets_;  // prefix sums, size num_params + 1
};

class ShardedParams {
 public:
  ShardedParams(std::span<const size_t> numels, int world_size);

  int world_size() const { return world_size_; }
  size_t num_params() const { return numels_.size(); }
  size_t param_numel(size_t param) const { return numels_[param]; }
  // ceil(n / N): the shard every rank stores of this parameter (zeros past the end).
  size_t shard_numel(size_t param) const { return shard_[param]; }
  // Where shard `param` starts in a rank's packed partition buffer.
  size_t shard_offset(size_t param) const { return shard_offsets_[param]; }
  size_t partition_numel() const { return shard_offsets_.back(); }
  // Real (non-padding) elements of `param` that `rank` stores.
  size_t real_in_shard(size_t param, int rank) const;

 private:
  int world_size_;
  std::vector<size_t> numels_;
  std::vector<size_t> shard_;
  std::vector<size_t> shard_offsets_;  // prefix sums of shard_, size num_params + 1
};

}  // namespace dsx::zero
