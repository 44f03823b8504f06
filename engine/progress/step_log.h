// DeepSpeed's progress lines, in DeepSpeed's words, so that scripts that read DeepSpeed logs read
// dsx's too:
//   every steps_per_print optimizer steps (engine.py _report_progress):
//     [2026-11-30 14:37:28,123] [INFO] [dsx] [Rank 0] step=10, skipped=0, lr=[0.0001],
//         mom=[(0.9, 0.999)]
//   and the throughput timer's line (utils/timer.py ThroughputTimer):
//     ... epoch=0/micro_step=40/global_step=10, RunningAvgSamplesPerSec=123.4,
//         CurrSamplesPerSec=125.0, MemAllocated=0.55GB, MaxMemAllocated=0.6GB
// (each is one line in the output).
// Numbers print as Python prints them. DeepSpeed's "[file.py:line:function]" field becomes "[dsx]".
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace dsx::engine::progress {

// One optimizer parameter group: its learning rate and momentum — Adam's (beta1, beta2), printed
// as a tuple, or SGD's single momentum, printed as a number.
struct GroupState {
  double lr = 0;
  std::vector<double> momentum;
};

// "step=10, skipped=0, lr=[0.0001], mom=[(0.9, 0.999)]"
std::string format_step_line(int64_t step, int64_t skipped, std::span<const GroupState> groups);

// "[2026-11-30 14:37:28,123] [INFO] [dsx] [Rank 0] " — Python logging's asctime, local time.
std::string log_prefix(std::chrono::system_clock::time_point when, int rank);

// DeepSpeed's ThroughputTimer with the clock passed in (seconds), so that the numbers it reports
// follow DeepSpeed's rules exactly: the first `start_step` optimizer steps are warm-up and not
// timed; RunningAvgSamplesPerSec = batch / (timed seconds / (global steps - start_step));
// CurrSamplesPerSec = batch / seconds of the optimizer step just finished (all its micro-steps).
class ThroughputTimer {
 public:
  // batch_size: train_batch_size (samples per optimizer step, all ranks); steps_per_output:
  // steps_per_print (no line when absent).
  ThroughputTimer(int64_t batch_size, std::optional<int64_t> steps_per_output,
                  int64_t start_step = 2);

  void start(double now);
  // Ends a micro-step (global_step: it was also an optimizer step). Returns the report line when
  // this optimizer step is a multiple of steps_per_output and report_speed is set.
  std::optional<std::string> stop(double now, bool global_step, bool report_speed,
                                  double memory_allocated_gb = 0,
                                  double max_memory_allocated_gb = 0);
  void update_epoch_count();

  double avg_samples_per_sec() const;  // -inf before the first optimizer step, as DeepSpeed
  int64_t global_step_count() const { return global_step_count_; }
  int64_t micro_step_count() const { return micro_step_count_; }

 private:
  int64_t batch_size_;
  std::optional<int64_t> steps_per_output_;
  int64_t start_step_;
  bool started_ = false;
  double start_time_ = 0;
  int64_t epoch_count_ = 0;
  int64_t micro_step_count_ = 0;
  int64_t global_step_count_ = 0;
  double total_elapsed_time_ = 0;
  double step_elapsed_time_ = 0;
};

}  // namespace dsx::engine::progress
