// DeepSpeed's log lines every steps_per_print steps: the step, skipped steps, lr and momentum,
// and with wall_clock_breakdown the forward/backward/step times, the wait for gradient
// reductions and the share of communication hidden behind backward. Rank 0 only.
#pragma once

#include "config/ds_config.h"
#include "engine/observers/step_observer.h"

namespace dsx::engine {

class StepLogPrinter final : public StepObserver {
 public:
  StepLogPrinter(const config::EngineConfig& config, Trainer& trainer, int rank, Say say)
      : config_(config), trainer_(trainer), rank_(rank), say_(std::move(say)) {}
  void after_step(const StepEvent& event) override;

 private:
  const config::EngineConfig& config_;
  Trainer& trainer_;
  int rank_;
  Say say_;
};

}  // namespace dsx::engine
