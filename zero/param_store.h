// Where the model's parameters come from, one strategy chosen once from the stage:
//   Replicated (stage 0)  every rank keeps and updates the full copy.
//   Flat (stages 1, 2)    every rank keeps the full copy and updates its partition; after the
//                         step the partitions are allgathered on the communication stream and
//                         the compute stream waits for them.
//   Sharded (stage 3)     every rank keeps its shards; layers are gathered for the model
//                         (ParamGatherer) and dropped after the step.
// The storage is fp32 in ZeRO order; this rank's partition of it is what the optimizer updates.
#pragma once

#include <memory>

#include "zero/layout.h"
#include "zero/partitioning.h"
#include "zero/zero_context.h"

namespace dsx::zero {

class ParamStore {
 public:
  virtual ~ParamStore() = default;
  virtual void prefetch(int layer) { (void)layer; }
  // The layer's parameters, full, in ZeRO order; the compute stream is ordered after their arrival.
  virtual const float* acquire(int layer) = 0;
  virtual void release(int layer, bool backward) {
    (void)layer;
    (void)backward;
  }
  // The optimizer updated this rank's partition on the compute stream.
  virtual void after_step() = 0;
  // The storage was written on the compute stream (initial values): later gathers read it.
  virtual void written() {}
  // Every parameter in ZeRO order into host memory `out`. A collective at stage 3.
  virtual void gather_all(float* out) = 0;
  float* storage() { return storage_.data(); }

 protected:
  Buffer<float> storage_;
};

std::unique_ptr<ParamStore> make_param_store(const ZeroLayout& layout, const Partitioning& partitioning,
                                             ZeroContext& context);

}  // namespace dsx::zero
