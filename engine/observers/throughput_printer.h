// DeepSpeed's throughput timer: every micro-step ends, and every steps_per_print optimizer steps
// rank 0 prints the samples/s line.
#pragma once

#include "engine/observers/step_observer.h"
#include "engine/progress/step_log.h"

namespace dsx::engine {

class ThroughputPrinter final : public StepObserver {
 public:
  ThroughputPrinter(progress::ThroughputTimer& timer, int gradient_accumulation_steps, int rank, Say say)
      : timer_(timer), gas_(gradient_accumulation_steps), rank_(rank), say_(std::move(say)) {}
  void after_step(const StepEvent& event) override;

 private:
  progress::ThroughputTimer& timer_;
  int gas_;
  int rank_;
  Say say_;
};

}  // namespace dsx::engine
