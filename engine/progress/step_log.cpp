// DeepSpeed-format step and throughput lines.
#include "engine/progress/step_log.h"

#include <cmath>
#include <ctime>
#include <limits>

#include "engine/monitor/python_float.h"

namespace dsx::engine::progress {
namespace {

using monitor::python_float_repr;

std::string python_list(std::span<const GroupState> groups, bool momentum) {
  std::string out = "[";
  for (size_t g = 0; g < groups.size(); ++g) {
    if (g) out += ", ";
    if (!momentum) {
      out += python_float_repr(groups[g].lr);
    } else if (groups[g].momentum.size() == 1) {
      out += python_float_repr(groups[g].momentum[0]);
    } else {
      out += "(";
      for (size_t i = 0; i < groups[g].momentum.size(); ++i)
        out += (i ? ", " : "") + python_float_repr(groups[g].momentum[i]);
      out += ")";
    }
  }
  return out + "]";
}

constexpr double kTimeEpsilon = 1e-6;  // DeepSpeed's TIME_EPSILON

}  // namespace

std::string format_step_line(int64_t step, int64_t skipped, std::span<const GroupState> groups) {
  return "step=" + std::to_string(step) + ", skipped=" + std::to_string(skipped) +
         ", lr=" + python_list(groups, false) + ", mom=" + python_list(groups, true);
}

std::string log_prefix(std::chrono::system_clock::time_point when, int rank) {
  const std::time_t seconds = std::chrono::system_clock::to_time_t(when);
  const auto millis =
      std::chrono::duration_cast<std::chrono::milliseconds>(when.time_since_epoch()).count() % 1000;
  std::tm local{};
  localtime_r(&seconds, &local);
  char text[64];
  std::strftime(text, sizeof text, "%Y-%m-%d %H:%M:%S", &local);
  char stamp[96];
  std::snprintf(stamp, sizeof stamp, "[%s,%03lld] [INFO] [dsx] [Rank %d] ", text,
                static_cast<long long>(millis), rank);
  return stamp;
}

ThroughputTimer::ThroughputTimer(int64_t batch_size, std::optional<int64_t> steps_per_output,
                                 int64_t start_step)
    : batch_size_(batch_size), steps_per_output_(steps_per_output), start_step_(start_step) {}

void ThroughputTimer::start(double now) {
  started_ = true;
  if (global_step_count_ >= start_step_) start_time_ = now;
}

std::optional<std::string> ThroughputTimer::stop(double now, bool global_step, bool report_speed,
                                                 double memory_allocated_gb,
                                                 double max_memory_allocated_gb) {
  if (!started_) return std::nullopt;
  started_ = false;
  ++micro_step_count_;
  if (global_step) ++global_step_count_;
  std::optional<std::string> line;
  if (start_time_ > 0) {
    const double duration = now - start_time_;
    total_elapsed_time_ += duration;
    step_elapsed_time_ += duration;
    if (global_step) {
      if (report_speed && steps_per_output_ && *steps_per_output_ > 0 &&
          global_step_count_ % *steps_per_output_ == 0)
        line =
            "epoch=" + std::to_string(epoch_count_) +
            "/micro_step=" + std::to_string(micro_step_count_) +
            "/global_step=" + std::to_string(global_step_count_) +
            ", RunningAvgSamplesPerSec=" + python_float_repr(avg_samples_per_sec()) +
            ", CurrSamplesPerSec=" +
            python_float_repr(static_cast<double>(batch_size_) /
                              (step_elapsed_time_ + kTimeEpsilon)) +
            ", MemAllocated=" + python_float_repr(monitor::python_round(memory_allocated_gb, 2)) +
            "GB, MaxMemAllocated=" +
            python_float_repr(monitor::python_round(max_memory_allocated_gb, 2)) + "GB";
      step_elapsed_time_ = 0;
    }
  }
  return line;
}

void ThroughputTimer::update_epoch_count() {
  ++epoch_count_;
  micro_step_count_ = 0;
}

double ThroughputTimer::avg_samples_per_sec() const {
  if (global_step_count_ <= 0) return -std::numeric_limits<double>::infinity();
  const double avg_time_per_step =
      total_elapsed_time_ / static_cast<double>(global_step_count_ - start_step_);
  return static_cast<double>(batch_size_) / avg_time_per_step;
}

}  // namespace dsx::engine::progress
