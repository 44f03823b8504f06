// The progress display (bar or plain lines) after each step, and the profiled window of an
// autotuning trial. Small observers that only record or forward.
#pragma once

#include "engine/observers/step_observer.h"
#include "engine/progress/progress_display.h"

namespace dsx::engine {

class ProgressUpdater final : public StepObserver {
 public:
  explicit ProgressUpdater(progress::ProgressDisplay& display) : display_(display) {}
  void after_step(const StepEvent& event) override {
    display_.update(event.step.global_step, event.step.loss, event.step.lr, event.step.tokens, event.time);
  }

 private:
  progress::ProgressDisplay& display_;
};

// The seconds of steps (start_step, last step]: an autotuning trial's timed window.
class ProfileWindow final : public StepObserver {
 public:
  ProfileWindow(int64_t start_step, double run_start) : start_step_(start_step), start_(run_start), end_(run_start) {}
  void after_step(const StepEvent& event) override {
    if (event.step.global_step == start_step_) start_ = event.time;
    end_ = event.time;
  }
  double seconds() const { return end_ - start_; }

 private:
  int64_t start_step_;
  double start_, end_;
};

}  // namespace dsx::engine
