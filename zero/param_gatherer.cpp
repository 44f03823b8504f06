// Stage 3 gathers (see param_gatherer.h).
#include "zero/param_gatherer.h"

#include <cstring>

namespace dsx::zero {

ParamGatherer::ParamGatherer(const ZeroLayout& layout, const ShardedParams& shards, const ZeroOptions& options,
                             comm::Communicator& comm, MemoryLedger& ledger, const float* partition)
    : layout_(layout), shards_(shards), options_(options), comm_(comm), ledger_(ledger), partition_(partition),
      layers_(static_cast<size_t>(layout.num_layers())), persistent_(layers_.size(), false) {
  size_t persisted = 0;
  for (int l = 0; l < layout.num_layers(); ++l) {
    const size_t numel = layout.layer_numel(l);
    if (numel <= options.param_persistence_threshold && persisted + numel <= options.model_persistence_threshold) {
      persistent_[static_cast<size_t>(l)] = true;
      persisted += numel;
    }
  }
}

ParamGatherer::~ParamGatherer() {
  // A gather still in flight writes into our buffers: let it land before they go.
  for (auto& g : layers_) {
    if (g && g->work && !g->work->done()) {
      try {
        g->work->wait(options_.comm_timeout);
      } catch (...) {
        // the communicator reports the failure elsewhere; nothing to save here
      }
    }
  }
}

ParamGatherer::Gathered& ParamGatherer::start_gather(int layer) {
  const size_t first = layout_.layer_first(layer);
  const size_t last = layout_.layer_last(layer);
  const size_t shard_begin = shards_.shard_offset(first);
  const size_t k = shards_.shard_offset(last) - shard_begin;
  const size_t world = static_cast<size_t>(comm_.size());
  auto& slot = layers_[static_cast<size_t>(layer)];
  slot.emplace();
  slot->full = Buffer<float>(ledger_, MemoryKind::Buffers, layout_.layer_numel(layer));
  slot->received = Buffer<float>(ledger_, MemoryKind::Buffers, k * world);
  float* mine = slot->received.data() + static_cast<size_t>(comm_.rank()) * k;
  std::memcpy(mine, partition_ + shard_begin, k * sizeof(float));
  slot->work = comm_.allgather(mine, slot->received.data(), k, kernels::DType::F32);
  live_ += layout_.layer_numel(layer);
  ++gathers_;
  return *slot;
}

void ParamGatherer::unpack(int layer, const float* received, float* full) const {
  const size_t first = layout_.layer_first(layer);
  const size_t shard_begin = shards_.shard_offset(first);
  const size_t k = shards_.shard_offset(layout_.layer_last(layer)) - shard_begin;
  const size_t layer_begin = layout_.layer_range(layer).begin;
  for (size_t p = first; p < layout_.layer_last(layer); ++p) {
    const size_t s = shards_.shard_numel(p);
    float* dst = full + (layout_.offset_at(p) - layer_begin);
    for (int r = 0; r < comm_.size(); ++r) {
      const size_t real = shards_.real_in_shard(p, r);
      if (real == 0) continue;
      std::memcpy(dst + static_cast<size_t>(r) * s,
                  received + static_cast<size_t>(r) * k + (shards_.shard_offset(p) - shard_begin),
                  real * sizeof(float));
    }
  }
}

void ParamGatherer::complete(int layer, Gathered& g) {
  if (!g.work) return;
  g.work->wait(options_.comm_timeout);
  unpack(layer, g.received.data(), g.full.data());
  g.received.reset();
  g.work.reset();
}

void ParamGatherer::prefetch(int layer) {
  if (layer < 0 || layer >= layout_.num_layers() || options_.prefetch_bucket_size == 0) return;
  if (layers_[static_cast<size_t>(layer)]) return;
  const size_t numel = layout_.layer_numel(layer);
  if (numel == 0 || prefetched_ + numel > options_.prefetch_bucket_size ||
      live_ + numel > options_.max_live_parameters) {
    return;
  }
  start_gather(layer).prefetched = true;
  prefetched_ += numel;
}

const float* ParamGatherer::acquire(int layer) {
  auto& slot = layers_[static_cast<size_t>(layer)];
  if (!slot) start_gather(layer);
  if (slot->prefetched) {
    prefetched_ -= layout_.layer_numel(layer);
    slot->prefetched = false;
  }
  complete(layer, *slot);
  return slot->full.data();
}

void ParamGatherer::release(int layer, bool backward) {
  if (persistent_[static_cast<size_t>(layer)]) return;
  // Elements the model touches before it needs this layer again: the layers after it in forward
  // and again in backward, or the layers before it in backward and again in the next forward.
  size_t between = 0;
  for (int l = 0; l < layout_.num_layers(); ++l) {
    if (backward ? l < layer : l > layer) between += layout_.layer_numel(l);
  }
  between *= 2;
  if (between <= options_.max_reuse_distance && live_ <= options_.max_live_parameters) return;
  drop(layer);
}

void ParamGatherer::drop(int layer) {
  auto& slot = layers_[static_cast<size_t>(layer)];
  if (!slot) return;
  if (slot->work) complete(layer, *slot);
  if (slot->prefetched) prefetched_ -= layout_.layer_numel(layer);
  live_ -= layout_.layer_numel(layer);
  slot.reset();
}

void ParamGatherer::invalidate() {
  for (int l = 0; l < layout_.num_layers(); ++l) drop(l);
}

void ParamGatherer::gather_all(float* out) {
  for (int l = 0; l < layout_.num_layers(); ++l) {
    const size_t numel = layout_.layer_numel(l);
    if (numel == 0) continue;
    const bool had = layers_[static_cast<size_t>(l)].has_value();
    const float* full = acquire(l);
    std::memcpy(out + layout_.layer_range(l).begin, full, numel * sizeof(float));
    if (!had) drop(l);
  }
}

}  // namespace dsx::zero
