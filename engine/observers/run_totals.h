// The run's totals for the closing summary: tokens, samples, the first, final and lowest loss.
#pragma once

#include "engine/observers/step_observer.h"
#include "engine/progress/progress_display.h"

namespace dsx::engine {

class RunTotals final : public StepObserver {
 public:
  explicit RunTotals(progress::RunSummary& summary) : summary_(summary) {}
  void after_step(const StepEvent& event) override;

 private:
  progress::RunSummary& summary_;
};

}  // namespace dsx::engine
