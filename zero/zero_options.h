// Everything ZeRO needs to know from the ds_config (zero_optimization, fp16/bf16, gradient
// clipping and averaging, communication_data_type, the optimizer), already resolved by
// config/ and the engine: ZeRO never reads JSON.
#pragma once

#include <chrono>
#include <cstddef>
#include <optional>

#include "config/zero_partitioning.h"
#include "kernels/dtype.h"
#include "zero/loss_scaler.h"
#include "zero/param_swapper.h"
#include "zero/partition_optimizer.h"

namespace dsx::zero {

// ds_config counts are the file's integers (int64); ZeRO counts elements in size_t.
inline size_t as_count(int64_t n) { return n > 0 ? static_cast<size_t>(n) : 0; }

// The ds_config's partitioning keys come whole, as config::ZeroPartitioning (with its defaults);
// the rest is resolved by the engine from the other blocks.
struct ZeroOptions : config::ZeroPartitioning {
  // gradient averaging (ref/zero_and_kernels.md §1.9)
  kernels::DType comm_dtype = kernels::DType::F32;
  double gradient_predivide_factor = 1.0;
  bool prescale_gradients = false;
  bool average_gradients = true;  // false: gradient_allreduce_op "sum"
  double gradient_clipping = 0.0;  // <= 0: off
  // mixed precision
  // What the model reads and writes: its parameters and gradients in this dtype. F32: they are
  // their own master copy. F16/BF16: ZeRO keeps an fp32 master partition beside a 16-bit working
  // copy (DeepSpeed's mixed-precision layout: 2 + 2 + 12 bytes per parameter at stage 0).
  kernels::DType model_dtype = kernels::DType::F32;
  LossScalerConfig loss_scaler{.dynamic = false, .static_scale = 1.0};  // fp16 sets its own
  bool check_overflow = false;   // skip the step when a gradient is Inf/NaN (fp16; bf16 optional)
  OptimizerSpec optimizer;
  // offload_optimizer.device "nvme" at stage 3: the optimizer state lives in swap files.
  std::optional<OptimizerSwapOptions> optimizer_nvme;
  // offload_param.device "nvme" at stage 3: the parameter shards live in a swap file.
  std::optional<ParamSwapOptions> param_nvme;
  std::chrono::milliseconds comm_timeout = std::chrono::minutes(5);
  // The bytes this rank may hold (0: no limit; a GPU's memory, or `dsx train --device_memory`)
  // and the model's activations, charged to the ledger first so that the limit sees the whole
  // rank and an allocation past it fails with Error(OutOfMemory), as cudaMalloc would.
  size_t memory_limit = 0;
  size_t model_activation_bytes = 0;
  size_t frozen_param_bytes = 0;  // weights the model holds frozen outside ZeRO (LoRA's base): params
};

// What one optimizer step did.
struct StepResult {
  bool applied = false;     // false: skipped for an Inf/NaN gradient
  double grad_norm = 0.0;   // global L2 norm of the unscaled gradients (before clipping)
  double loss_scale = 1.0;  // the scale backward used for this step
  double clip_coefficient = 1.0;
};

// Communication of the gradient reductions, and how much of it ran while backward went on.
struct CommTiming {
  double busy_seconds = 0.0;     // time the reductions were in flight, overlaps merged
  double exposed_seconds = 0.0;  // time the engine stood waiting for them
  size_t bytes = 0;              // bytes handed to collectives (message sizes)
  // Bytes this rank sends for them on a ring (nccl-tests' bus factors: an allreduce of n bytes
  // sends 2(N-1)/N·n, a reduce-scatter of N blocks of b bytes (N-1)·b).
  double bus_bytes = 0.0;
  size_t operations = 0;
  size_t reduce_scatters = 0;    // of the operations, how many were reduce-scatters
  double hidden_fraction() const {
    if (busy_seconds <= 0.0) return 0.0;
    double f = 1.0 - exposed_seconds / busy_seconds;
    return f < 0.0 ? 0.0 : (f > 1.0 ? 1.0 : f);
  }
};

}  // namespace dsx::zero
