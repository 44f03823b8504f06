// Gradient buckets (DeepSpeed's IPG buckets): layers whose gradients are final join the open
// bucket; a bucket of reduce_bucket_size elements is reduced across the data-parallel ranks.
// With overlap_comm the reduction is launched and backward goes on (at most two in flight, as
// in DeepSpeed); without it the reduction is waited for at once.
//
// Three ways to reduce, one per kind of ZeRO storage:
//   InPlace       stages 0/1: the layers are a contiguous range of the full gradient buffer;
//                 allreduce it (in place for fp32, through a 16-bit copy otherwise).
//   ToPartition   stage 2: allreduce a copy of the bucket and add this rank's part of it into
//                 the gradient partition (the flat partition of stages 1/2).
//   ToShards      stage 3: every parameter is cut in N shards; one reduce-scatter of the bucket
//                 interleaved rank by rank, and the rank adds its shards into its partition.
// Averaging follows DeepSpeed: gradients are multiplied by `pre` before the sum and by `post`
// after it (pre = 1/N with prescale_gradients, else 1/predivide_factor; post = predivide/N).
#pragma once

#include <chrono>
#include <deque>
#include <functional>
#include <vector>

#include "comm/communicator.h"
#include "zero/layout.h"
#include "zero/memory.h"
#include "zero/partition.h"
#include "zero/zero_options.h"

namespace dsx::zero {

class GradReducer {
 public:
  enum class Mode { InPlace, ToPartition, ToShards };

  // `partition` (ToPartition/ToShards) receives the reduced gradients, added to what it holds.
  // `flat` is needed by ToPartition, `shards` by ToShards. Once a layer's gradients have been
  // copied for communication, `copied(layer)` is called: the caller may free that memory then.
  GradReducer(Mode mode, const ZeroLayout& layout, const FlatPartition* flat, const ShardedParams* shards,
              const ZeroOptions& options, comm::Communicator& comm, MemoryLedger& ledger, float* partition,
              std::function<void(int)> copied);

  // The gradients of `layer` (its layer_numel floats, ZeRO order) are final.
  void add(int layer, float* grad);
  // Reduces what is left and waits for every reduction.
  void flush_and_wait();
  const CommTiming& timing() const { return timing_; }

 private:
  struct Entry {
    int layer;
    float* grad;
  };
  struct InFlight {
    std::vector<Entry> entries;
    Buffer<uint8_t> comm;  // what the collective reads and writes (unless InPlace fp32)
    comm::WorkHandle work;
    std::chrono::steady_clock::time_point launched;
    size_t numel = 0;
    float* in_place = nullptr;  // InPlace fp32: the range of the full buffer
  };

  void flush();
  void launch(InFlight& f);
  void finish_oldest();
  void pack(InFlight& f);
  void unpack(InFlight& f);
  size_t bucket_numel() const;

  Mode mode_;
  const ZeroLayout& layout_;
  const FlatPartition* flat_;
  const ShardedParams* shards_;
  ZeroOptions options_;
  comm::Communicator& comm_;
  MemoryLedger& ledger_;
  float* partition_;
  std::function<void(int)> copied_;
  float pre_ = 1.0f, post_ = 1.0f;
  std::vector<Entry> open_;
  std::deque<InFlight> in_flight_;
  std::chrono::steady_clock::time_point busy_until_{};
  CommTiming timing_;
};

}  // namespace dsx::zero
