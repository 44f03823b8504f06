// Stage 3 gathers (see param_gatherer.h).
#include "zero/param_gatherer.h"

#include <array>
#include <memory>
#include <string>

#include "trace/trace.h"

namespace dsx::zero {

ParamGatherer::ParamGatherer(const ZeroLayout& layout, const ShardedParams& shards,
                             ZeroContext& context, const void* partition,
                             ParamSwapper* swapper)
    : layout_(layout),
      shards_(shards),
      ctx_(context),
      partition_(static_cast<const uint8_t*>(partition)),
      swapper_(swapper),
      dtype_(context.options.model_dtype),
      esize_(kernels::dtype_size(dtype_)),
      shards_updated_(context.device.create_event()),
      layers_(static_cast<size_t>(layout.num_layers())),
      persistent_(layers_.size(), false) {
  const ZeroOptions& options = ctx_.options;
  size_t persisted = 0;
  for (int l = 0; l < layout.num_layers(); ++l) {
    const size_t numel = layout.layer_numel(l);
    if (numel <= as_count(options.param_persistence_threshold) &&
        persisted + numel <= as_count(options.model_persistence_threshold)) {
      persistent_[static_cast<size_t>(l)] = true;
      persisted += numel;
    }
  }
  // The shards were written on the compute stream: gathers start after that.
  ctx_.compute.record(*shards_updated_);
}

ParamGatherer::~ParamGatherer() {
  // A gather still queued writes into our buffers, and the model may still read a gathered
  // layer: let both land before the buffers go. Each stream is waited for even when the other
  // failed (a swap-in error fails the communication stream): an error path must still free in
  // order.
  for (device::Stream* stream : {&ctx_.comm_stream, &ctx_.compute}) {
    try {
      stream->synchronize(ctx_.options.comm_timeout);
    } catch (...) {
      // the failure was reported where it happened; what matters here is the wait
    }
  }
  // Each layer freed by its last user, as release() does: a layer the model used was read on
  // the compute stream, not on the communication stream it was allocated on.
  for (int l = 0; l < layout_.num_layers(); ++l) drop(l);
}

ParamGatherer::Gathered& ParamGatherer::start_gather(int layer, const char* why) {
  const size_t first = layout_.layer_first(layer);
  const size_t last = layout_.layer_last(layer);
  const size_t shard_begin = shards_.shard_offset(first);
  const size_t k = shards_.shard_offset(last) - shard_begin;
  const size_t world = static_cast<size_t>(ctx_.comm.size());
  device::Stream& stream = ctx_.comm_stream;
  auto& slot = layers_[static_cast<size_t>(layer)];
  slot.emplace();
  if (!shards_waited_) {
    stream.wait(*shards_updated_);
    shards_waited_ = true;
  }
  slot->full =
      ctx_.buffer<uint8_t>(MemoryKind::Buffers, layout_.layer_numel(layer) * esize_, stream);
  Buffer<uint8_t> received = ctx_.buffer<uint8_t>(MemoryKind::Buffers, k * world * esize_, stream);
  uint8_t* mine = received.data() + static_cast<size_t>(ctx_.comm.rank()) * k * esize_;
  std::shared_ptr<trace::Clock::time_point> began;
  if (trace::recording()) {
    began = std::make_shared<trace::Clock::time_point>();
    ctx_.device.host_task(stream, [began] { *began = trace::Clock::now(); }, {}, "time stamp");
  }
  copy_shards(layer, mine, shard_begin, k);
  ctx_.comm.allgather_on(ctx_.device, stream, mine, received.data(), k, dtype_);
  unpack(layer, received.data(), slot->full.data());
  if (began) {
    // The gather on the "parameter gathers" track, from when the stream began it to its end.
    const double bytes = static_cast<double>(k * world * esize_);
    ctx_.device.host_task(
        stream,
        [began, layer, bytes, why] {
          trace::span(trace::track("parameter gathers"), std::string(why) + " layer " + std::to_string(layer),
                      "comm", *began, trace::Clock::now(), {{"bytes", bytes}});
        },
        {}, "trace span");
  }
  received.reset(stream);
  slot->ready = ctx_.device.create_event();
  stream.record(*slot->ready);
  live_ += layout_.layer_numel(layer);
  ++gathers_;
  return *slot;
}

void ParamGatherer::copy_shards(int layer, uint8_t* mine, size_t shard_begin, size_t k) {
  if (!swapper_) {
    ctx_.device.copy(mine, partition_ + shard_begin * esize_, k * esize_, ctx_.comm_stream);
    return;
  }
  // The read waits on the disk on the stream's thread; the compute stream goes on meanwhile.
  const std::array<device::Touch, 1> t{device::Touch{mine, k * esize_, device::Access::Write}};
  ParamSwapper* swapper = swapper_;
  ctx_.device.host_task(ctx_.comm_stream, [swapper, layer, mine] { swapper->read_layer(layer, mine); },
                        t, "parameter swap-in");
}

void ParamGatherer::unpack(int layer, const uint8_t* received, uint8_t* full) {
  const size_t first = layout_.layer_first(layer);
  const size_t shard_begin = shards_.shard_offset(first);
  const size_t k = shards_.shard_offset(layout_.layer_last(layer)) - shard_begin;
  const size_t layer_begin = layout_.layer_range(layer).begin;
  for (size_t p = first; p < layout_.layer_last(layer); ++p) {
    const size_t s = shards_.shard_numel(p);
    uint8_t* dst = full + (layout_.offset_at(p) - layer_begin) * esize_;
    for (int r = 0; r < ctx_.comm.size(); ++r) {
      const size_t real = shards_.real_in_shard(p, r);
      if (real == 0) continue;
      ctx_.device.copy(
          dst + static_cast<size_t>(r) * s * esize_,
          received +
              (static_cast<size_t>(r) * k + (shards_.shard_offset(p) - shard_begin)) * esize_,
          real * esize_, ctx_.comm_stream);
    }
  }
}

void ParamGatherer::prefetch(int layer) {
  const ZeroOptions& options = ctx_.options;
  if (layer < 0 || layer >= layout_.num_layers() || options.prefetch_bucket_size == 0) return;
  if (layers_[static_cast<size_t>(layer)]) return;
  const size_t numel = layout_.layer_numel(layer);
  if (numel == 0 || prefetched_ + numel > as_count(options.prefetch_bucket_size) ||
      live_ + numel > as_count(options.max_live_parameters)) {
    return;
  }
  start_gather(layer, "prefetch").prefetched = true;
  prefetched_ += numel;
}

const void* ParamGatherer::acquire(int layer) {
  auto& slot = layers_[static_cast<size_t>(layer)];
  if (!slot) start_gather(layer, "gather");
  if (slot->prefetched) {
    prefetched_ -= layout_.layer_numel(layer);
    slot->prefetched = false;
  }
  if (!slot->used) {
    ctx_.compute.wait(*slot->ready);
    slot->used = true;
  }
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
  if (between <= as_count(ctx_.options.max_reuse_distance) && live_ <= as_count(ctx_.options.max_live_parameters))
    return;
  drop(layer);
}

void ParamGatherer::drop(int layer) {
  auto& slot = layers_[static_cast<size_t>(layer)];
  if (!slot) return;
  if (slot->prefetched) prefetched_ -= layout_.layer_numel(layer);
  live_ -= layout_.layer_numel(layer);
  // The last user frees it: the model (compute stream) or, never used, the gather itself.
  slot->full.reset(slot->used ? ctx_.compute : ctx_.comm_stream);
  slot.reset();
}

void ParamGatherer::invalidate() {
  for (int l = 0; l < layout_.num_layers(); ++l) drop(l);
  ctx_.compute.record(*shards_updated_);
  shards_waited_ = false;
}

void ParamGatherer::gather_all(void* out) {
  for (int l = 0; l < layout_.num_layers(); ++l) {
    const size_t numel = layout_.layer_numel(l);
    if (numel == 0) continue;
    const bool had = layers_[static_cast<size_t>(l)].has_value();
    const void* full = acquire(l);
    ctx_.device.copy(static_cast<uint8_t*>(out) + layout_.layer_range(l).begin * esize_, full,
                     numel * esize_, ctx_.compute);
    if (!had) drop(l);
  }
  ctx_.compute.synchronize(ctx_.options.comm_timeout);
}

}  // namespace dsx::zero
