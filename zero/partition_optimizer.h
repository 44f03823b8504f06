// The optimizer of one rank's partition: the fp32 master slice, its state (Adam's moments, Lion's
// momentum, ...) and the fused kernel call. A partition holds pieces of several tensors, some with
// weight decay and some without (biases, norms), so the kernel runs once per run of equal decay,
// as DeepSpeed runs it once per parameter group. LAMB needs the norm of every whole tensor, which
// may straddle ranks: the caller sums the per-tensor squares across ranks between the phases.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "device/device.h"
#include "kernels/optimizer_math.h"
#include "kernels/optimizers.h"
#include "zero/memory.h"
#include "zero/optimizer_swapper.h"

namespace dsx::zero {

enum class OptimizerType { Adam, Lamb, Lion, Sgd, Adagrad };
const char* optimizer_type_name(OptimizerType type);

struct OptimizerSpec {
  OptimizerType type = OptimizerType::Adam;
  kernels::AdamHyper adam;
  kernels::LambHyper lamb;
  kernels::LionHyper lion;
  kernels::SgdHyper sgd;
  kernels::AdagradHyper adagrad;
  double lr() const;
  double weight_decay() const;
};

// A run of the partition that belongs to one tensor.
struct Segment {
  size_t begin = 0;   // element of the partition
  size_t count = 0;
  bool decay = true;
  size_t tensor = 0;  // which tensor (for LAMB's per-tensor norms)
};

// What changes from step to step: the scheduler's lr and (OneCycle) betas.
struct StepHyper {
  double lr = 0;
  std::optional<double> beta1;
  std::optional<double> beta2;
};

class PartitionOptimizer {
 public:
  // `segments` cover [0, numel) in order (gaps are padding, left untouched); `num_tensors` is
  // the number of distinct tensors they name. The state lives on `device`; the kernels run on
  // `stream` (the compute stream).
  // With `nvme`, the state lives in swap files of rank `rank` instead (optimizer_swapper.h) and the
  // step goes sub-group by sub-group (host devices only).
  PartitionOptimizer(const OptimizerSpec& spec, size_t numel, std::vector<Segment> segments,
                     size_t num_tensors, MemoryLedger& ledger, device::Device& device, device::Stream& stream,
                     const std::optional<OptimizerSwapOptions>& nvme = std::nullopt, int rank = 0);

  // One update of `param` (numel fp32, device) with `grad` (numel fp32, multiplied by
  // grad_factor first: a host value, or a device one the kernels read), enqueued on the stream. For
  // LAMB, `sum_across_ranks` adds the 2 * num_tensors per-tensor squares (host values) of all ranks
  // in place (identity on one rank). `copy` (data: the working copy of the partition's first
  // element) also receives the updated parameters in its dtype.
  void step(float* param, const float* grad, kernels::GradFactor grad_factor,
            const StepHyper& hyper, const std::function<void(double*, size_t)>& sum_across_ranks,
            kernels::ParamCopy copy = {});

  const OptimizerSpec& spec() const { return spec_; }
  int64_t steps() const { return steps_; }
  void set_steps(int64_t steps) { steps_ = steps; }
  // The state tensors by name ("exp_avg", "exp_avg_sq", "momentum_buffer", "sum"), for checkpoints.
  std::vector<std::pair<std::string, Buffer<float>*>> state();
  size_t state_bytes_per_element() const;
  // The state by name, wherever it lives (device memory or swap files), as host copies of numel
  // elements: what checkpoints save and load. Enqueued on the stream; swap reads/writes at once.
  std::vector<std::string> state_names() const;
  void copy_state_out(size_t index, float* host);
  void copy_state_in(size_t index, const float* host);
  const OptimizerSwapper* swapper() const { return swapper_.get(); }
  // With OptimizerSwapOptions::swap_master the fp32 master partition is in the swap files too:
  // step() takes no `param` (null), and these move it whole (host memory, numel elements).
  bool master_swapped() const { return master_index_ == 1; }
  void copy_master_out(float* host);
  void copy_master_in(const float* host);
  // Called after each swapped sub-group's update ran, with its master values (elements
  // [begin, begin + count)): where a working copy that is not in memory gets them.
  void on_group_stepped(std::function<void(size_t begin, size_t count, const float* master)> f) {
    group_stepped_ = std::move(f);
  }

 private:
  // The update of elements [lo, hi) with the master at param_lo and the state at a and b
  // (element lo there).
  void step_range(float* param_lo, const float* grad, kernels::GradFactor grad_factor, const StepHyper& hyper,
                  kernels::ParamCopy copy, size_t lo, size_t hi, float* a, float* b);
  void step_lamb(float* param, const float* grad, kernels::GradFactor grad_factor, const kernels::LambHyper& hyper,
                 const std::function<void(double*, size_t)>& sum_across_ranks, kernels::ParamCopy copy);

  OptimizerSpec spec_;
  device::Device& device_;
  device::Stream& stream_;
  MemoryLedger& ledger_;
  size_t numel_;
  std::vector<Segment> segments_;
  size_t num_tensors_;
  Buffer<float> state_a_;  // exp_avg / momentum / sum
  Buffer<float> state_b_;  // exp_avg_sq (Adam, LAMB)
  int64_t steps_ = 0;
  std::unique_ptr<OptimizerSwapper> swapper_;  // set: the state is on NVMe, state_a_/b_ empty
  size_t master_index_ = 0;  // 1: the swapper's first tensor is the fp32 master
  std::function<void(size_t, size_t, const float*)> group_stepped_;
};

}  // namespace dsx::zero
