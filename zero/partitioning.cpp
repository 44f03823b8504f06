// The three ways of splitting ZeRO's state (see partitioning.h).
#include "zero/partitioning.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "dsx/error.h"

namespace dsx::zero {
namespace {

class Replicated final : public Partitioning {
 public:
  explicit Replicated(const ZeroLayout& layout) : Partitioning(layout) {}
  bool partitioned() const override { return false; }
  size_t storage_numel() const override { return layout_.numel(); }
  size_t partition_offset(int) const override { return 0; }
  size_t partition_numel() const override { return layout_.numel(); }
  std::vector<Run> partition_runs(int) const override { return storage_runs(0); }
  std::vector<Run> storage_runs(int) const override {
    std::vector<Run> runs;
    for (size_t p = 0; p < layout_.num_params(); ++p)
      runs.push_back({p, 0, layout_.offset_at(p), layout_.info_at(p).numel});
    return runs;
  }
};

class Flat final : public Partitioning {
 public:
  Flat(const ZeroLayout& layout, int world)
      : Partitioning(layout), flat_(layout.numels_in_order(), world) {}
  size_t storage_numel() const override { return flat_.padded_numel(); }
  size_t partition_offset(int rank) const override { return flat_.partition_begin(rank); }
  size_t partition_numel() const override { return flat_.partition_numel(); }
  std::vector<Run> partition_runs(int rank) const override {
    std::vector<Run> runs;
    const size_t begin = flat_.partition_begin(rank);
    for (const Piece& piece : flat_.pieces_of_rank(rank)) {
      runs.push_back({piece.param, piece.param_offset, piece.flat_offset - begin, piece.count});
    }
    return runs;
  }
  std::vector<Run> storage_runs(int) const override { return Replicated(layout_).storage_runs(0); }
  const FlatPartition* flat() const override { return &flat_; }

 private:
  FlatPartition flat_;
};

class Sharded final : public Partitioning {
 public:
  Sharded(const ZeroLayout& layout, int world)
      : Partitioning(layout), shards_(layout.numels_in_order(), world) {}
  size_t storage_numel() const override { return shards_.partition_numel(); }
  size_t partition_offset(int) const override { return 0; }
  size_t partition_numel() const override { return shards_.partition_numel(); }
  std::vector<Run> partition_runs(int rank) const override {
    std::vector<Run> runs;
    for (size_t p = 0; p < layout_.num_params(); ++p) {
      const size_t real = shards_.real_in_shard(p, rank);
      if (real > 0)
        runs.push_back(
            {p, shards_.shard_numel(p) * static_cast<size_t>(rank), shards_.shard_offset(p), real});
    }
    return runs;
  }
  std::vector<Run> storage_runs(int rank) const override { return partition_runs(rank); }
  const ShardedParams* sharded() const override { return &shards_; }

 private:
  ShardedParams shards_;
};

}  // namespace

std::vector<Segment> Partitioning::segments(int rank) const {
  std::vector<Segment> segments;
  for (const Run& r : partition_runs(rank)) {
    segments.push_back({r.offset, r.count, layout_.info_at(r.position).decay, r.position});
  }
  return segments;
}

void Partitioning::take(const float* full, float* partition, int rank) const {
  std::memset(partition, 0, partition_numel() * sizeof(float));
  for (const Run& r : partition_runs(rank)) {
    std::memcpy(partition + r.offset, full + layout_.offset_at(r.position) + r.param_offset,
                r.count * sizeof(float));
  }
}

void Partitioning::scatter(const float* partition, float* full, int rank) const {
  for (const Run& r : partition_runs(rank)) {
    std::memcpy(full + layout_.offset_at(r.position) + r.param_offset, partition + r.offset,
                r.count * sizeof(float));
  }
}

std::unique_ptr<Partitioning> make_partitioning(int stage, const ZeroLayout& layout, int world) {
  switch (stage) {
    case 0:
      return std::make_unique<Replicated>(layout);
    case 1:
    case 2:
      return std::make_unique<Flat>(layout, world);
    case 3:
      return std::make_unique<Sharded>(layout, world);
    default:
      throw Error(ErrorKind::Config,
                  "zero_optimization.stage must be 0, 1, 2 or 3, not " + std::to_string(stage));
  }
}

}  // namespace dsx::zero
