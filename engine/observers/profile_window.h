// The timed window of an autotuning trial (DeepSpeed's start_profile_step..end_profile_step):
// how long its steps took together, and how much their times varied.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "engine/observers/step_observer.h"

namespace dsx::engine {

// The seconds of steps (start_step, last step]: an autotuning trial's timed window, and how much
// its steps' times varied.
class ProfileWindow final : public StepObserver {
 public:
  ProfileWindow(int64_t start_step, double run_start) : start_step_(start_step), start_(run_start), end_(run_start) {}
  void after_step(const StepEvent& event) override {
    if (event.step.global_step > start_step_) step_seconds_.push_back(event.time - end_);
    if (event.step.global_step == start_step_) start_ = event.time;
    end_ = event.time;
  }
  double seconds() const { return end_ - start_; }
  // Standard deviation of the timed steps' durations over their mean; 0 for fewer than two.
  double spread() const {
    if (step_seconds_.size() < 2) return 0;
    double mean = 0, var = 0;
    for (double s : step_seconds_) mean += s;
    mean /= static_cast<double>(step_seconds_.size());
    for (double s : step_seconds_) var += (s - mean) * (s - mean);
    var /= static_cast<double>(step_seconds_.size() - 1);
    return mean > 0 ? std::sqrt(var) / mean : 0;
  }

 private:
  int64_t start_step_;
  double start_, end_;
  std::vector<double> step_seconds_;  // each step after start_step
};

}  // namespace dsx::engine
