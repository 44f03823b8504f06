// DeepSpeed's model-state memory estimators, to the byte: estimate_zero2_model_states_mem_needs
// (deepspeed/runtime/zero/stage_1_and_2.py) and estimate_zero3_model_states_mem_needs
// (deepspeed/runtime/zero/stage3.py) as of DeepSpeed 0.19 (the formulas after PR #5099, not the
// older ones memory.rst still shows). The arithmetic follows Python's order of operations and its
// int/float mixing so the truncated results equal DeepSpeed's; docs/estimate.md has the check.
#pragma once

#include <cstdint>

namespace dsx::estimate {

struct ModelStateBytes {
  int64_t cpu_per_node = 0;  // host memory per node
  int64_t gpu = 0;           // device memory per GPU
};

constexpr double kDeepSpeedBufferFactor = 1.5;  // DeepSpeed's additional_buffer_factor default

// ZeRO-2 with Adam in mixed precision. cpu_offload = offload_optimizer to the CPU.
ModelStateBytes deepspeed_zero2_model_states(int64_t total_params, int64_t gpus_per_node,
                                             int64_t nodes, bool cpu_offload,
                                             double buffer_factor = kDeepSpeedBufferFactor);

// ZeRO-3. largest_layer_params: the largest module's own parameters (model_to_params).
// cpu_offload = offload_optimizer, cpu_offload_params = offload_param, zero_init = the model
// is built partitioned (deepspeed.zero.Init) rather than whole on every process first.
ModelStateBytes deepspeed_zero3_model_states(int64_t total_params, int64_t largest_layer_params,
                                             int64_t gpus_per_node, int64_t nodes, bool cpu_offload,
                                             bool cpu_offload_params, bool zero_init,
                                             double buffer_factor = kDeepSpeedBufferFactor);

}  // namespace dsx::estimate
