// The memory one GPU and one node's CPU need to train a model with a given ZeRO stage and
// offload choice: model states (DeepSpeed's estimator formulas wherever DeepSpeed has one),
// activations, communication buffers and a reserve for the CUDA context and NCCL; whether that
// fits the GPU; and the fewest GPUs of that type that fit. `dsx estimate` prints this.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "config/zero_partitioning.h"
#include "tools/estimate/adapter_memory.h"
#include "tools/estimate/activations.h"
#include "tools/estimate/deepspeed_estimators.h"
#include "tools/estimate/model_shape.h"

namespace dsx::estimate {

enum class Precision { Bf16, Fp16, Fp32 };
// offload_optimizer / + offload_param to the CPU, or to NVMe (ZeRO-Infinity: stage 3 only).
enum class Offload { None, Optimizer, OptimizerAndParams, OptimizerNvme, OptimizerAndParamsNvme };

const char* to_string(Precision precision);
const char* to_string(Offload offload);

bool offloads_params(Offload offload);
bool offloads_to_nvme(Offload offload);

struct ZeroOption {
  int stage = 0;
  Offload offload = Offload::None;
  Method method = Method::Full;  // full fine-tuning, or adapters on a frozen base
};

// Every valid (stage, offload) pair among the requested ones: offload needs ZeRO 1 or more,
// parameter offload and NVMe need ZeRO 3. LoRA and QLoRA rows come unoffloaded (their optimizer
// state is a few hundred MB at most), at the lowest requested stage below 3 and (LoRA) at 3.
std::vector<ZeroOption> zero_options(const std::vector<int>& stages,
                                     const std::vector<Offload>& offloads,
                                     const std::vector<Method>& methods = {Method::Full});

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
  AdapterOptions adapter;                      // LoRA / QLoRA rows
  // ZeRO-Infinity's pinned swap buffers (DeepSpeed's defaults): sub_group_size elements of fp32
  // times offload_optimizer.buffer_count; offload_param.buffer_count x buffer_size 16-bit elements.
  int64_t sub_group_size = 1000000000;
  int64_t optimizer_buffer_count = 4;
  int64_t param_buffer_count = 5;
  int64_t param_buffer_size = 100000000;
};

struct MemoryEstimate {
  ZeroOption option;
  const char* model_states_formula = "";  // which formula produced the model-state figures
  int64_t gpu_model_states = 0;
  int64_t gpu_activations = 0;
  int64_t gpu_buffers = 0;
  int64_t gpu_reserve = 0;
  int64_t cpu_model_states = 0;  // per node
  int64_t nvme_per_node = 0;     // ZeRO-Infinity swap files
  int64_t trainable_params = 0;  // all parameters, or the adapters'
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
