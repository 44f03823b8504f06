// The frozen base of a LoRA run at ZeRO stage 3: partitioned as stage 3 partitions parameters,
// so each rank holds 1/world of every layer's base weights, and gathered whole only while the
// model computes that layer (acquire: an allgather on the run's communicator; release: freed).
// No gradients and no optimizer state exist for these weights (models/lora/frozen_weights.h).
// Every rank acquires the layers in the same order (the Model layer protocol). ZeRO issues its own
// collectives on its communication stream, so once order_on() names that stream the gathers are
// enqueued there too and every rank's communicator sees one order; each wait has a timeout.
#pragma once

#include <map>
#include <vector>

#include "comm/communicator.h"
#include "device/device.h"
#include "models/model.h"

namespace dsx::engine {

// A layer's range of the flat layout: [begin, end).
struct FrozenLayerRange {
  size_t begin = 0, end = 0;
};
// Each layer's range in `specs` (a base of `flat_size` elements). Error(Internal) when a layer's
// tensors are not contiguous or the base is shorter than the model.
std::map<int, FrozenLayerRange> frozen_layer_ranges(const std::vector<models::ParamSpec>& specs,
                                                    size_t flat_size);

class PartitionedFrozenWeights final : public models::ParamAccess {
 public:
  // `flat`: the whole base in `specs`' layout (only this rank's share is kept). Each layer's
  // tensors must be contiguous in it, as the decoder models lay them out.
  PartitionedFrozenWeights(const std::vector<models::ParamSpec>& specs, const std::vector<float>& flat,
                           comm::Communicator& comm);

  // Gathers from now on run on `stream` of `device` (ZeRO's communication stream), after what
  // it already holds.
  void order_on(device::Device& device, device::Stream& stream) { device_ = &device, stream_ = &stream; }

  void acquire(int layer) override;
  const void* param(size_t index) override;
  void release(int layer) override;
  // Elements this rank keeps between gathers (its shares, padding included).
  size_t held_elements() const;
  size_t held_bytes() const override { return held_elements() * sizeof(float); }

 private:
  struct Layer {
    size_t begin = 0, end = 0;  // the layer's range of the flat layout
    size_t share = 0;           // elements per rank: ceil((end - begin) / world)
    std::vector<float> mine;    // this rank's share
    std::vector<float> whole;   // gathered (share * world), empty when released
  };
  std::vector<models::ParamSpec> specs_;
  std::map<int, Layer> layers_;
  comm::Communicator& comm_;
  device::Device* device_ = nullptr;
  device::Stream* stream_ = nullptr;
};

}  // namespace dsx::engine
