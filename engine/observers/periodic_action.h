// Something done every N optimizer steps but not after the last one, which the end of the run
// does itself: evaluation (--eval_interval), checkpoint saves (--save_interval).
#pragma once

#include <cstdint>
#include <functional>

#include "engine/observers/step_observer.h"

namespace dsx::engine {

class PeriodicAction final : public StepObserver {
 public:
  // `interval` <= 0: never. `action` gets the step just taken.
  PeriodicAction(int64_t interval, std::function<void(int64_t step)> action)
      : interval_(interval), action_(std::move(action)) {}
  void after_step(const StepEvent& event) override {
    const int64_t step = event.step.global_step;
    if (interval_ > 0 && step % interval_ == 0 && !event.last) action_(step);
  }

 private:
  int64_t interval_;
  std::function<void(int64_t)> action_;
};

}  // namespace dsx::engine
