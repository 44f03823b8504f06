// Where the model's parameters come from, one strategy chosen once from the stage:
//   Replicated (stage 0)  every rank keeps and updates the full copy.
//   Flat (stages 1, 2)    every rank keeps the full copy and updates its partition; after the
//                         step the partitions are allgathered on the communication stream and
//                         the compute stream waits for them.
//   Sharded (stage 3)     every rank keeps its shards; layers are gathered for the model
//                         (ParamGatherer) and dropped after the step.
//   Swapped (stage 3, offload_param "nvme")  as Sharded, but the shards live in a swap file
//                         (ParamSwapper) and the fp32 master partition is always separate: the
//                         step updates it, and the working copy is written to the file after.
// The storage is in ZeRO order and in the model's dtype. For an fp32 model it is its own master
// copy; for a 16-bit one the store also keeps this rank's fp32 master partition (DeepSpeed's
// mixed-precision layout), which the optimizer updates while writing the 16-bit copy.
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
  // The layer's parameters, full, in ZeRO order and the model's dtype; the compute stream is
  // ordered after their arrival.
  virtual const void* acquire(int layer) = 0;
  virtual void release(int layer, bool backward) {
    (void)layer;
    (void)backward;
  }
  // This rank's partition was updated on the compute stream (the working copy too).
  virtual void after_step() = 0;
  // The storage was written on the compute stream (initial values): later gathers read it.
  virtual void written() {}
  // Every parameter in ZeRO order into host memory `out`, in the model's dtype. A collective at
  // stage 3.
  virtual void gather_all(void* out) = 0;
  // Stores `count` elements (the model's dtype, host memory) at element `offset` of the storage:
  // enqueued on the compute stream, `src` alive until it ran.
  virtual void store(size_t offset, const void* src, size_t count);
  // Where the optimizer writes the updated working copy of the partition (data null: nowhere,
  // refresh_working() makes it from the master after the step).
  virtual kernels::ParamCopy working_copy();
  // The working copy of the partition from the fp32 master (separate_master() stores whose
  // master is in memory).
  virtual void refresh_working();
  // Elements [begin, begin + count) of the swapped master were updated (master_swapped()).
  virtual void master_stepped(size_t begin, size_t count, const float* master) {
    (void)begin;
    (void)count;
    (void)master;
  }

  uint8_t* storage() { return storage_.data(); }
  // This rank's working copy of its partition, and its fp32 master partition.
  void* working_partition() { return storage_.data() + partition_offset_ * esize_; }
  // Null when the master is in the optimizer's swap files (master_swapped()).
  float* master() {
    return separate_master_ ? master_.data() : reinterpret_cast<float*>(working_partition());
  }
  bool master_swapped() const { return master_swapped_; }
  bool separate_master() const { return separate_master_; }

 protected:
  // `swapped`: no storage in memory (the swapper holds it), and a separate fp32 master.
  ParamStore(const Partitioning& partitioning, ZeroContext& context, bool swapped = false);
  ZeroContext& context_;
  Buffer<uint8_t> storage_;
  Buffer<float> master_;  // 16-bit models only
  size_t partition_offset_;
  size_t esize_;
  bool separate_master_;
  bool master_swapped_;  // stage 3, offload_optimizer "nvme": the master lives in its swap files
};

// Stage 3 with offload_param "nvme" (swapped_param_store.cpp).
std::unique_ptr<ParamStore> make_swapped_store(const ZeroLayout& layout,
                                               const Partitioning& partitioning,
                                               ZeroContext& context);

std::unique_ptr<ParamStore> make_param_store(const ZeroLayout& layout,
                                             const Partitioning& partitioning,
                                             ZeroContext& context);

}  // namespace dsx::zero
