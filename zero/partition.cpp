// Index arithmetic of ZeRO partitions (see partition.h).
#include "zero/partition.h"

#include <algorithm>
#include <string>

#include "dsx/error.h"

namespace dsx::zero {
namespace {

size_t round_up(size_t n, size_t multiple) { return (n + multiple - 1) / multiple * multiple; }

void check_world(int world_size) {
  if (world_size < 1) {
    throw Error(ErrorKind::Internal, "ZeRO partition over " + std::to_string(world_size) + " ranks");
  }
}

}  // namespace

FlatPartition::FlatPartition(std::span<const size_t> numels, int world_size, size_t alignment)
    : world_size_(world_size), numel_(0), partition_(0) {
  check_world(world_size);
  offsets_.reserve(numels.size() + 1);
  offsets_.push_back(0);
  for (size_t n : numels) offsets_.push_back(offsets_.back() + n);
  numel_ = offsets_.back();
  const size_t padded = round_up(std::max<size_t>(numel_, 1), alignment * static_cast<size_t>(world_size));
  partition_ = padded / static_cast<size_t>(world_size);
}

size_t FlatPartition::padding(int rank) const {
  const size_t begin = partition_begin(rank);
  const size_t end = begin + partition_;
  if (numel_ <= begin) return partition_;
  return numel_ < end ? end - numel_ : 0;
}

std::vector<Piece> FlatPartition::pieces(size_t begin, size_t end) const {
  std::vector<Piece> out;
  end = std::min(end, numel_);
  if (begin >= end) return out;
  // first parameter whose range ends after `begin`
  size_t p = static_cast<size_t>(std::upper_bound(offsets_.begin(), offsets_.end(), begin) - offsets_.begin()) - 1;
  for (size_t at = begin; at < end; ++p) {
    const size_t param_end = offsets_[p + 1];
    if (param_end <= at) continue;  // empty parameter
    const size_t stop = std::min(end, param_end);
    out.push_back(Piece{p, at - offsets_[p], at, stop - at});
    at = stop;
  }
  return out;
}

ShardedParams::ShardedParams(std::span<const size_t> numels, int world_size)
    : world_size_(world_size), numels_(numels.begin(), numels.end()) {
  check_world(world_size);
  shard_offsets_.push_back(0);
  for (size_t n : numels_) {
    const size_t shard = (n + static_cast<size_t>(world_size) - 1) / static_cast<size_t>(world_size);
    shard_.push_back(shard);
    shard_offsets_.push_back(shard_offsets_.back() + shard);
  }
}

size_t ShardedParams::real_in_shard(size_t param, int rank) const {
  const size_t begin = shard_[param] * static_cast<size_t>(rank);
  const size_t n = numels_[param];
  if (begin >= n) return 0;
  return std::min(shard_[param], n - begin);
}

}  // namespace dsx::zero
