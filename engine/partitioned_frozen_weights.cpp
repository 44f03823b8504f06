// PartitionedFrozenWeights (see partitioned_frozen_weights.h).
#include "engine/partitioned_frozen_weights.h"

#include <algorithm>
#include <string>

#include "dsx/error.h"

namespace dsx::engine {

namespace {
// A gather waits behind ZeRO's queued reductions too; the communicator bounds each of them.
constexpr std::chrono::minutes kGatherTimeout{10};
}  // namespace

std::map<int, FrozenLayerRange> frozen_layer_ranges(const std::vector<models::ParamSpec>& specs,
                                                    size_t flat_size) {
  std::map<int, FrozenLayerRange> ranges;
  std::map<int, size_t> numel;
  for (const auto& s : specs) {
    auto [it, fresh] = ranges.try_emplace(s.layer);
    if (fresh) it->second.begin = s.offset, it->second.end = s.offset + s.numel;
    it->second.begin = std::min(it->second.begin, s.offset);
    it->second.end = std::max(it->second.end, s.offset + s.numel);
    numel[s.layer] += s.numel;
  }
  for (const auto& [layer, r] : ranges) {
    if (numel[layer] != r.end - r.begin)
      throw Error(ErrorKind::Internal, "frozen base: layer " + std::to_string(layer) +
                                           "'s tensors are not contiguous in the flat layout");
    if (r.end > flat_size)
      throw Error(ErrorKind::Internal, "frozen base: the weights are shorter than the model");
  }
  return ranges;
}

PartitionedFrozenWeights::PartitionedFrozenWeights(const std::vector<models::ParamSpec>& specs,
                                                   const std::vector<float>& flat, comm::Communicator& comm)
    : specs_(specs), comm_(comm) {
  const size_t world = static_cast<size_t>(comm_.size()), rank = static_cast<size_t>(comm_.rank());
  for (const auto& [layer, range] : frozen_layer_ranges(specs_, flat.size())) {
    Layer& l = layers_[layer];
    l.begin = range.begin, l.end = range.end;
    l.share = (l.end - l.begin + world - 1) / world;
    l.mine.assign(l.share, 0.0f);
    const size_t first = l.begin + rank * l.share;
    for (size_t i = 0; i < l.share && first + i < l.end; ++i) l.mine[i] = flat[first + i];
  }
}

void PartitionedFrozenWeights::acquire(int layer) {
  auto it = layers_.find(layer);
  if (it == layers_.end()) return;  // a layer without base weights
  Layer& l = it->second;
  l.whole.assign(l.share * static_cast<size_t>(comm_.size()), 0.0f);
  if (!stream_) {
    comm_.allgather(l.mine.data(), l.whole.data(), l.share, kernels::DType::F32)->wait();
    return;
  }
  comm_.allgather_on(*device_, *stream_, l.mine.data(), l.whole.data(), l.share, kernels::DType::F32);
  stream_->synchronize(kGatherTimeout);
}

const void* PartitionedFrozenWeights::param(size_t index) {
  const models::ParamSpec& s = specs_.at(index);
  const Layer& l = layers_.at(s.layer);
  if (l.whole.empty())
    throw Error(ErrorKind::Internal, "frozen base: " + s.name + " read before its layer was acquired");
  return l.whole.data() + (s.offset - l.begin);
}

void PartitionedFrozenWeights::release(int layer) {
  auto it = layers_.find(layer);
  if (it != layers_.end()) std::vector<float>().swap(it->second.whole);
}

size_t PartitionedFrozenWeights::held_elements() const {
  size_t n = 0;
  for (const auto& [layer, l] : layers_) n += l.mine.size();
  return n;
}

}  // namespace dsx::engine
