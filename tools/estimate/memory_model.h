// The memory one GPU and one node's CPU need to train a model with a given ZeRO stage and
// offload choice: model states (DeepSpeed's estimator formulas wherever DeepSpeed has one),
// activations, communication buffers and a reserve for the CUDA context and NCCL; whether that
// fits the GPU; and the fewest GPUs of that type that fit. `dsx estimate` prints this.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "config/zero_partitioning.h"
#include "tools/estimate/activations.h"
#include "tools/estimate/deepspeed_estimators.h"
#include "tools/estimate/model_shape.h"

namespace dsx::estimate {

enum class Precision { Bf16, Fp16, Fp32 };
enum class Offload { None, Optimizer, OptimizerAndParams };  // offload_optimizer / + offload_param

const char* to_string(Precision precision);
const char* to_string(Offload offload);

struct ZeroOption {
  int stage = 0;
  Offload offload = Offload::None;
};

// Every valid (stage, offload) pair among the requested ones: offload needs ZeRO 1 or more,
// parameter offload needs ZeRO 3.
std::vector<ZeroOption> zero_options(const std::vector<int>& stages,
                                     const std::vector<Offload>& offloads);

struct Cluster {
  int64_t gpus_per_node = 1;
  int64_t nodes = 1;
  int64_t total_gpus() const { return gpus_per_node * nodes; }
};

struct EstimateRequest {
  ModelShape model;
  ActivationOptions activations;  // bytes_per_value is set from precision
  Precision precision = Precision::Bf16;
  Cluster cluster;
  int64_t gpu_memory_bytes = 0;
  int64_t cpu_memory_per_node_bytes = 0;  // 0: not checked
  bool zero_init = true;                  // ZeRO-3 builds the model partitioned (zero.Init)
  double buffer_factor = kDeepSpeedBufferFactor;
  // elements; the ds_config defaults unless a file or a flag says otherwise
  int64_t reduce_bucket_size = config::ZeroPartitioning{}.reduce_bucket_size;
  int64_t prefetch_bucket_size = config::ZeroPartitioning{}.prefetch_bucket_size;
  std::optional<bool> overlap_comm;           // unset: config::default_overlap_comm(stage)
  int64_t reserve_bytes = int64_t{1} << 30;   // CUDA context, NCCL, allocator slack
};

struct MemoryEstimate {
  ZeroOption option;
  const char* model_states_formula = "";  // which formula produced the model-state figures
  int64_t gpu_model_states = 0;
  int64_t gpu_activations = 0;
  int64_t gpu_buffers = 0;
  int64_t gpu_reserve = 0;
  int64_t cpu_model_states = 0;  // per node
  bool fits_gpu = false;
  bool fits_cpu = true;         // true when the CPU memory is not checked
  int64_t max_micro_batch = 0;  // the largest micro-batch that fits this GPU, 0 if none
  int64_t gpu_total() const {
    return gpu_model_states + gpu_activations + gpu_buffers + gpu_reserve;
  }
  bool fits() const { return fits_gpu && fits_cpu; }
};

// Model-state bytes per GPU and per node's CPU. For fp16/bf16 with ZeRO 2 and 3 these are
// DeepSpeed's estimator results exactly; stages 0 and 1 and fp32 use the same per-parameter
// terms partitioned as those stages partition them (docs/estimate.md).
ModelStateBytes model_state_bytes(int64_t params, int64_t largest_layer_params, Precision precision,
                                  const Cluster& cluster, ZeroOption option, bool zero_init,
                                  double buffer_factor, const char** formula = nullptr);

// Throws dsx::Error(Config) when the request is impossible or so large that its byte counts
// would not fit in 64 bits (more than an exabyte per GPU).
void validate(const EstimateRequest& request);

MemoryEstimate estimate_memory(const EstimateRequest& request, ZeroOption option);

// The smallest cluster that fits: 1..gpus_per_node GPUs on one node, then whole nodes of
// gpus_per_node GPUs, up to max_gpus. nullopt when none does.
std::optional<Cluster> fewest_gpus(const EstimateRequest& request, ZeroOption option,
                                   int64_t max_gpus = 8192);

}  // namespace dsx::estimate
