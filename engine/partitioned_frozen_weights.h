// The frozen base of a LoRA run at ZeRO stage 3: partitioned as stage 3 partitions parameters,
// so each rank holds 1/world of every layer's base weights, and gathered whole only while the
// model computes that layer (acquire: an allgather on the run's communicator; release: freed).
// No gradients and no optimizer state exist for these weights (models/lora/frozen_weights.h).
// Every rank acquires the layers in the same order (the Model layer protocol), so the gathers
// match up; each waits with the communicator's timeout.
#pragma once

#include <map>
#include <vector>

#include "comm/communicator.h"
#include "models/model.h"

namespace dsx::engine {

class PartitionedFrozenWeights final : public models::ParamAccess {
 public:
  // `flat`: the whole base in `specs`' layout (only this rank's share is kept). Each layer's
  // tensors must be contiguous in it, as the decoder models lay them out.
  PartitionedFrozenWeights(const std::vector<models::ParamSpec>& specs, const std::vector<float>& flat,
                           comm::Communicator& comm);

  void acquire(int layer) override;
  const void* param(size_t index) override;
  void release(int layer) override;
  // Elements this rank keeps between gathers (its shares, padding included).
  size_t held_elements() const;

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
};

}  // namespace dsx::engine
