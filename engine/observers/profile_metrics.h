// What one profiled run measured, as DeepSpeed's engine reports it to its autotuner: with
// `autotuning.enabled` and `autotuning.metric_path` set, `dsx train` times the steps after
// start_profile_step up to end_profile_step, writes this file and stops. `dsx autotune` reads it.
// DeepSpeed's keys (latency, throughput, FLOPS_per_gpu) come first; dsx adds the memory the
// ranks held, so that a trial tells how close it came to its limit.
#pragma once

#include <cstdint>
#include <string>

namespace dsx::engine {

struct ProfileMetrics {
  double latency = 0;        // seconds per optimizer step
  double throughput = 0;     // samples per second, all ranks
  double flops_per_gpu = 0;  // model FLOP/s per rank (forward + backward)
  int64_t peak_memory_bytes = 0;   // the most any rank's ledger held at once
  int64_t activation_bytes = 0;    // of that, the model's activations (rank 0)
  int64_t memory_limit_bytes = 0;  // 0: none
  int64_t profiled_steps = 0;
  // How much the profiled steps' times varied: their standard deviation over their mean (0 when
  // fewer than two steps were timed). Differences between trials below it are noise.
  double latency_spread = 0;
};

// Written atomically (a reader never sees half a file). Throws dsx::Error(Io).
void write_profile_metrics(const std::string& path, const ProfileMetrics& metrics);
// Throws dsx::Error(Io) when missing, dsx::Error(Format) when not such a file.
ProfileMetrics read_profile_metrics(const std::string& path);

}  // namespace dsx::engine
