// What acts between training steps (DESIGN.md §2: the loop stays short; everything that watches
// or acts between steps is an observer composed at set-up from the config). The loop tells each
// observer about every optimizer step, in the order they were composed; adding one touches no
// line of the loop.
#pragma once

#include <functional>
#include <string>

#include "engine/trainer.h"

namespace dsx::engine {

struct StepEvent {
  const TrainStep& step;
  double time = 0;       // when the step ended (seconds, steady clock)
  double comm_wait = 0;  // seconds this step waited for gradient reductions
  bool last = false;     // the run's final step
};

class StepObserver {
 public:
  virtual ~StepObserver() = default;
  virtual void after_step(const StepEvent& event) = 0;
};

// Prints one line through rank 0's progress display (a no-op on the other ranks).
using Say = std::function<void(const std::string&)>;

}  // namespace dsx::engine
