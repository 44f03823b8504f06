// ds_config's flops_profiler: the floating-point work of a training step as the model counts it
// (Model::forward_flops: every matmul, causal attention as computed), the time it took, and the
// model FLOPs utilisation against the peak this machine measurably reaches - on a CPU, an SGEMM
// with the rank's threads, measured in the same run (a CPU has no datasheet peak that means
// anything under shared load). Printed once, at profile_step, as DeepSpeed does.
#pragma once

#include <cstdint>
#include <string>

namespace dsx::engine {

// FLOPs per second of a 512x512x512 SGEMM on this thread count, best of a few runs.
double measured_sgemm_flops_per_second();

struct FlopsProfile {
  int64_t step = 0;
  size_t params = 0;
  double forward_flops = 0;  // one micro-batch
  int64_t micro_batches = 1;  // gradient_accumulation_steps
  bool recompute = false;     // activation checkpointing: forward runs twice
  double forward_seconds = 0, backward_seconds = 0, step_seconds = 0, iteration_seconds = 0;
  int64_t samples = 0;  // per optimizer step, all ranks
  int ranks = 1;
  double peak_flops_per_second = 0;  // per rank
};

// DeepSpeed's profile summary, in its words and units.
std::string format_flops_profile(const FlopsProfile& p);

}  // namespace dsx::engine
