// The progress display (bar or plain lines) after each step.
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

}  // namespace dsx::engine
