// Ends a run whose loss has gone NaN or inf: after `limit` consecutive steps with a non-finite
// loss (every rank sees the same mean loss, so every rank stops at the same step) it throws
// Error(Numeric) saying what to change, instead of training on to an exit status of 0.
#pragma once

#include <cstdint>

#include "engine/observers/step_observer.h"

namespace dsx::engine {

class DivergenceGuard final : public StepObserver {
 public:
  // `limit` <= 0: never stop.
  explicit DivergenceGuard(int64_t limit) : limit_(limit) {}
  void after_step(const StepEvent& event) override;

 private:
  int64_t limit_;
  int64_t run_ = 0;  // consecutive steps with a non-finite loss
};

}  // namespace dsx::engine
