// ZeRO stages 0-3 over one data-parallel group: owns every byte of parameters, gradients and
// optimizer state, hands the model its parameters layer by layer, takes its gradients layer by
// layer, reduces them in buckets while backward runs (overlap_comm), and at the accumulation
// boundary checks for overflow, computes the global norm, clips and runs the fused optimizer on
// this rank's partition. What each stage keeps (ref/zero_and_kernels.md §1):
//
//   stage  params            grads                              optimizer state
//   0      full              full, allreduced at the boundary   full
//   1      full              full, allreduced at the boundary   partition
//   2      full              partition, reduced every micro-step partition
//   3      partition         partition, reduce-scattered        partition
//
// The model-facing calls (acquire/param/release/grad/grad_ready) are what ParamAccess and
// GradSink forward to; the engine-facing calls run a step:
//
//   for each micro-step: begin_micro_step(boundary); forward; begin_backward(); backward;
//                        end_micro_step();
//   at the boundary:     step(hyper)
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include "comm/communicator.h"
#include "zero/grad_reducer.h"
#include "zero/layout.h"
#include "zero/loss_scaler.h"
#include "zero/memory.h"
#include "zero/param_gatherer.h"
#include "zero/partition.h"
#include "zero/partition_optimizer.h"
#include "zero/zero_options.h"

namespace dsx::zero {

// A parameter as the model lays it out: ZeRO's ParamInfo plus where it sits in the model's flat
// buffer (for initial values and for gathering the full model).
struct ModelParam {
  ParamInfo info;
  size_t model_offset = 0;
};

class ZeroEngine {
 public:
  // `initial` holds the model's parameters in the model's flat layout (every rank the same).
  ZeroEngine(const std::vector<ModelParam>& params, int num_layers, const float* initial,
             const ZeroOptions& options, comm::Communicator& comm);
  ~ZeroEngine();

  // ---- the model's side ----
  void acquire(int layer);
  void prefetch(int layer);
  const float* param(size_t index);
  void release(int layer);
  float* grad(size_t index);
  void grad_ready(int layer);

  // ---- the engine's side ----
  // `boundary`: this micro-step ends the gradient accumulation (its step() follows).
  void begin_micro_step(bool boundary);
  void begin_backward() { backward_ = true; }
  void end_micro_step();
  StepResult step(const StepHyper& hyper);

  double loss_scale() const { return scaler_.scale(); }
  LossScaler& loss_scaler() { return scaler_; }
  const MemoryLedger& memory() const { return ledger_; }
  const CommTiming& comm_timing() const { return reducer_->timing(); }
  int stage() const { return options_.stage; }
  size_t numel() const { return layout_.numel(); }
  // Every parameter, in the model's flat layout. A collective at stage 3: every rank calls it.
  void gather_params(float* model_flat);

  // ---- checkpoints: this rank's partition ----
  float* master_partition();  // the fp32 parameters this rank updates
  size_t master_numel() const;
  PartitionOptimizer& optimizer() { return *optimizer_; }
  // Overwrites this rank's partition (and, stages 0-2, the full copy) from a saved partition.
  void load_master_partition(const float* values);

  // ---- re-cutting partitions (a checkpoint saved by another world size or stage) ----
  const ZeroLayout& layout() const { return layout_; }
  // Elements in one rank's partition of a job of `world` ranks at `stage`.
  static size_t partition_numel_of(const ZeroLayout& layout, int stage, int world, int rank);
  // Writes that rank's partition into `full` (numel elements, ZeRO order); padding is dropped.
  static void scatter_partition(const ZeroLayout& layout, int stage, int world, int rank, const float* partition,
                                float* full);
  // This rank's partition of a full vector in ZeRO order (padding zero).
  void take_partition(const float* full, float* partition) const;

 private:
  float* grad_partition();
  size_t grad_partition_numel() const;
  std::vector<Segment> optimizer_segments() const;
  void zero_grads();
  void sync_full_params();

  std::vector<ModelParam> params_;
  ZeroOptions options_;
  comm::Communicator& comm_;
  MemoryLedger ledger_;
  ZeroLayout layout_;
  std::unique_ptr<FlatPartition> flat_;     // stages 1, 2
  std::unique_ptr<ShardedParams> shards_;   // stage 3
  Buffer<float> params_full_;               // stages 0-2 (padded for 1, 2)
  Buffer<float> params_partition_;          // stage 3
  Buffer<float> grads_full_;                // stages 0, 1
  Buffer<float> grads_partition_;           // stages 2, 3
  std::vector<Buffer<float>> grad_slots_;   // stages 2, 3: a layer's gradients until reduced
  std::vector<const float*> layer_params_;  // stage 3: acquired layers
  std::unique_ptr<GradReducer> reducer_;
  std::unique_ptr<ParamGatherer> gatherer_;
  std::unique_ptr<PartitionOptimizer> optimizer_;
  LossScaler scaler_;
  bool boundary_ = true;
  bool backward_ = false;
};

}  // namespace dsx::zero
