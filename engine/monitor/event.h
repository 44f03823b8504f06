// A monitor event and the sink interface every monitor implements — DeepSpeed's
// `write_events([(name, value, step)])`, with DeepSpeed's event names. The engine emits events
// on rank 0 at every optimizer step; `step` is the number of samples trained so far
// (DeepSpeed's global_samples), as DeepSpeed logs them.
#pragma once

#include <cstdint>
#include <span>
#include <string>

namespace dsx::engine::monitor {

struct Event {
  std::string name;
  double value = 0;
  int64_t step = 0;
};

class EventSink {
 public:
  virtual ~EventSink() = default;
  virtual void write_events(std::span<const Event> events) = 0;
  virtual void flush() {}
};

// DeepSpeed's names (docs/code-docs/source/monitor.rst and runtime/engine.py).
namespace names {
inline constexpr const char* kTrainLoss = "Train/Samples/train_loss";
inline constexpr const char* kLr = "Train/Samples/lr";
inline constexpr const char* kLossScale = "Train/Samples/loss_scale";  // fp16 only
// wall_clock_breakdown or flops_profiler: the step's phases in milliseconds.
inline constexpr const char* kForwardMs = "Train/Samples/elapsed_time_ms_forward";
inline constexpr const char* kBackwardMs = "Train/Samples/elapsed_time_ms_backward";
inline constexpr const char* kBackwardInnerMs = "Train/Samples/elapsed_time_ms_backward_inner";
inline constexpr const char* kBackwardAllreduceMs =
    "Train/Samples/elapsed_time_ms_backward_allreduce";
inline constexpr const char* kStepMs = "Train/Samples/elapsed_time_ms_step";
}  // namespace names

// os.path.join(output_path, job_name), where DeepSpeed's file monitors put their files.
std::string monitor_log_dir(const std::string& output_path, const std::string& job_name);

}  // namespace dsx::engine::monitor
