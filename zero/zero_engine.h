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
//
// Everything it owns lives on a device (device/device.h) and every piece of work is enqueued on
// the device's compute stream or on ZeRO's own communication stream, ordered by events; which
// device it is, ZeRO never asks. How the state is split (Partitioning), where the parameters
// come from (ParamStore) and where gradients go (GradStore) are chosen once from the stage.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "comm/communicator.h"
#include "device/device.h"
#include "zero/grad_reducer.h"
#include "zero/grad_store.h"
#include "zero/layout.h"
#include "device/owned_memory.h"
#include "zero/loss_scaler.h"
#include "zero/memory.h"
#include "zero/param_store.h"
#include "zero/partition.h"
#include "zero/partition_optimizer.h"
#include "zero/partitioning.h"
#include "zero/zero_context.h"
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
  // `initial` holds the model's parameters in the model's flat layout (every rank the same, host
  // memory). Without a device, ZeRO runs on a cpu device of its own (comm::make_host_device).
  ZeroEngine(const std::vector<ModelParam>& params, int num_layers, const float* initial,
             const ZeroOptions& options, comm::Communicator& comm);
  ZeroEngine(const std::vector<ModelParam>& params, int num_layers, const float* initial,
             const ZeroOptions& options, comm::Communicator& comm, device::Device& device);
  ~ZeroEngine();

  // ---- the model's side ----
  void acquire(int layer);
  void prefetch(int layer);
  // In the model's dtype (ZeroOptions::model_dtype).
  const void* param(size_t index);
  void release(int layer);
  void* grad(size_t index);
  void grad_ready(int layer);

  // ---- the engine's side ----
  // `boundary`: this micro-step ends the gradient accumulation (its step() follows).
  void begin_micro_step(bool boundary);
  void begin_backward() { backward_ = true; }
  void end_micro_step();
  // Returns once the host has waited for the compute stream's work enqueued before it: the
  // step's one host synchronisation (LAMB adds its own), so device
  // values copied to pinned host memory on the compute stream before step() are there after it.
  StepResult step(const StepHyper& hyper);
  // `n` fp32 device values summed over the ranks on ZeRO's communication stream, ordered after
  // the compute stream's work so far and before its later work: no host wait over nccl.
  void sum_on_device(float* values, size_t n);

  double loss_scale() const { return scaler_.scale(); }
  LossScaler& loss_scaler() { return scaler_; }
  const MemoryLedger& memory() const { return ledger_; }
  const CommTiming& comm_timing() const { return reducer_->timing(); }
  device::Device& device() { return device_; }
  // The stream every ZeRO collective runs on, in one order on every rank; other collectives on
  // the same communicator (a LoRA run's frozen-base gathers) go there too.
  device::Stream& comm_stream() { return *comm_stream_; }
  int stage() const { return options_.stage; }
  size_t numel() const { return layout_.numel(); }
  // Every parameter, in the model's flat layout. A collective at stage 3: every rank calls it.
  void gather_params(float* model_flat);

  // ---- checkpoints: this rank's partition ----
  // Host copies of the fp32 parameters this rank updates and of their optimizer state, wherever
  // the device keeps them: read after ZeRO's streams finished, written before the next step.
  struct PartitionState {
    std::vector<float> master;
    std::vector<std::pair<std::string, std::vector<float>>> optimizer;  // "exp_avg", ...
  };
  size_t master_numel() const;
  PartitionOptimizer& optimizer() { return *optimizer_; }
  // The names of the optimizer's state tensors, in PartitionState::optimizer's order.
  std::vector<std::string> optimizer_state_names();
  PartitionState save_partition();
  // Overwrites this rank's partition (and, stages 0-2, the full copy) and the optimizer state
  // from host values of master_numel() elements each (state: by name, every one of
  // optimizer_state_names()). Stages 1/2: an allgather, so every rank calls it.
  void load_partition(const PartitionState& state);

  // ---- re-cutting partitions (a checkpoint saved by another world size or stage) ----
  const ZeroLayout& layout() const { return layout_; }
  // Elements in one rank's partition of a job of `world` ranks at `stage`.
  static size_t partition_numel_of(const ZeroLayout& layout, int stage, int world, int rank);
  // Writes that rank's partition into `full` (numel elements, ZeRO order); padding is dropped.
  static void scatter_partition(const ZeroLayout& layout, int stage, int world, int rank,
                                const float* partition, float* full);
  // This rank's partition of a full vector in ZeRO order (padding zero).
  void take_partition(const float* full, float* partition) const;

 private:
  ZeroEngine(const std::vector<ModelParam>& params, int num_layers, const float* initial,
             const ZeroOptions& options, comm::Communicator& comm,
             std::unique_ptr<device::Device> owned, device::Device* device);
  // The partition's optimizer (with offload_optimizer "nvme" at stage 3, the master in its swap
  // files), and its fp32 master from the model's initial values.
  void make_optimizer();
  void init_master(const float* initial);
  // The model touches these bytes of ZeRO's memory on the compute stream.
  void touch(const void* data, size_t bytes, device::Access access, const char* what);
  void host_sync();
  const void* read_step_values(const void* values, size_t bytes);
  double read_sum_of_squares(kernels::DType dtype, const void* data, size_t count,
                             double loss_scale);
  kernels::GradFactor step_grad_factor(bool stage0_clipping, const std::vector<double>& tensor_sums,
                                       double sum_sq, StepResult& result);
  size_t model_bytes(size_t count) const {
    return count * kernels::dtype_size(options_.model_dtype);
  }
  // Adds host values over the ranks (fp32, as DeepSpeed's norm allreduce) when the state is
  // partitioned: LAMB's norms, with a host wait of their own.
  void sum_across_ranks(double* values, size_t n);
  // Each parameter's sum of squares (fp32 gradients), host values in the model's order.
  std::vector<double> tensor_sums_of_squares(const void* grads);
  // DeepSpeed's stage-0 clipping norm from them (clip_grad_norm_'s fp32 arithmetic; zero_engine.cpp).
  float stage0_clip_norm(const std::vector<double>& tensor_sums);

  std::unique_ptr<device::Device> owned_device_;  // first: destroyed last, after everything on it
  device::Device& device_;
  std::unique_ptr<device::Stream> comm_stream_;
  std::vector<ModelParam> params_;
  ZeroOptions options_;
  comm::Communicator& comm_;
  MemoryLedger ledger_;
  ZeroContext ctx_;
  ZeroLayout layout_;
  std::unique_ptr<Partitioning> partitioning_;
  std::unique_ptr<ParamStore> params_store_;
  std::unique_ptr<GradStore> grads_;
  std::unique_ptr<GradReducer> reducer_;
  std::unique_ptr<PartitionOptimizer> optimizer_;
  std::vector<const uint8_t*> layer_params_;  // acquired layers
  // A few scalars on the device (the sum of squares, values summed across ranks), kept out of
  // the reported ledger: they are not model state and would blur its exact counts.
  MemoryLedger scratch_ledger_;
  Buffer<double> scalar_;
  Buffer<float> global_sum_sq_;  // the partitions' sums of squares, summed over the ranks in fp32
  Buffer<float> grad_factor_;    // the step's unscale and clip factor, computed on the device
  Buffer<double> tensor_sums_;   // one sum of squares per parameter (stage 0 clipping)
  Buffer<float> rank_sums_;
  device::OwnedMemory rank_sums_host_;  // pinned: what the host hands the rank sum, and reads back
  device::OwnedMemory step_values_;     // pinned: the step's scalars, read by the host
  std::unique_ptr<device::Event> summed_;  // sum_on_device's edges between the streams
  LossScaler scaler_;
  bool boundary_ = true;
  bool backward_ = false;
};

}  // namespace dsx::zero
