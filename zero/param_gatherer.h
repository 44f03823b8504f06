// Stage 3's parameter fetching: each rank stores one shard of every parameter; before a layer
// runs, its shards are allgathered from every rank into the full layer, and after use the full
// copy is released unless it is small (stage3_param_persistence_threshold) or needed again soon
// (stage3_max_reuse_distance), within stage3_max_live_parameters. prefetch() starts the gather
// of a layer the model will need next, up to stage3_prefetch_bucket_size elements ahead.
//
// Unlike DeepSpeed, which decides per parameter, dsx gathers and keeps whole layers (the unit
// the model runs in); the persistence threshold applies to a layer's element count, and, as in
// DeepSpeed, layers stop being persistent once the persistent ones would hold more than
// stage3_model_persistence_threshold elements (counted in layer order).
//
// A gather runs on ZeRO's communication stream (copy this rank's shards in, allgather, unpack)
// after the optimizer's last update of the shards; acquire() orders the compute stream after it.
// A layer's memory is freed on the compute stream once the model used it, or on the
// communication stream when it was gathered ahead and never used.
#pragma once

#include <chrono>
#include <optional>
#include <vector>

#include <memory>

#include "zero/layout.h"
#include "zero/memory.h"
#include "zero/param_swapper.h"
#include "zero/partition.h"
#include "zero/zero_context.h"

namespace dsx::zero {

class ParamGatherer {
 public:
  // `partition`: this rank's shards in the model's dtype; or, with `swapper`, where they are read
  // from (on the communication stream, in the gather's place in its order).
  ParamGatherer(const ZeroLayout& layout, const ShardedParams& shards, ZeroContext& context,
                const void* partition, ParamSwapper* swapper = nullptr);
  ~ParamGatherer();

  void prefetch(int layer);
  // The layer's parameters, full, in ZeRO order (layer_numel elements of the model's dtype);
  // valid until release().
  const void* acquire(int layer);
  // `backward`: the model is in its backward pass (the layer's next use is the next step).
  void release(int layer, bool backward);
  // The parameters changed (an optimizer step on the compute stream): every gathered copy is
  // stale, and later gathers start after the compute stream's work so far.
  void invalidate();
  // Every parameter, full, in ZeRO order, into host memory `out` (numel elements of the model's
  // dtype). A collective: all ranks call it.
  void gather_all(void* out);

  size_t live_elements() const { return live_; }
  bool persistent(int layer) const { return persistent_[static_cast<size_t>(layer)]; }
  size_t gathers() const { return gathers_; }

 private:
  struct Gathered {
    Buffer<uint8_t> full;
    std::unique_ptr<device::Event> ready;  // on the communication stream, after the unpack
    bool prefetched = false;
    bool used = false;  // the compute stream waited for `ready`
  };

  Gathered& start_gather(int layer, const char* why);  // why: "gather" or "prefetch", for traces
  void drop(int layer);
  void unpack(int layer, const uint8_t* received, uint8_t* full);
  // This rank's shards of the layer into `mine`, on the communication stream.
  void copy_shards(int layer, uint8_t* mine, size_t shard_begin, size_t k);

  const ZeroLayout& layout_;
  const ShardedParams& shards_;
  ZeroContext& ctx_;
  const uint8_t* partition_;
  ParamSwapper* swapper_;
  kernels::DType dtype_;
  size_t esize_;
  std::unique_ptr<device::Event> shards_updated_;
  bool shards_waited_ = false;  // the communication stream waited for the latest update
  std::vector<std::optional<Gathered>> layers_;
  std::vector<bool> persistent_;  // never released between steps
  size_t live_ = 0;
  size_t prefetched_ = 0;  // elements gathered ahead and not yet acquired
  size_t gathers_ = 0;
};

}  // namespace dsx::zero
