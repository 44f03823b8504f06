// The ds_config's flops_profiler: DeepSpeed's profile summary of step profile_step, printed or
// written to output_file. Rank 0 only.
#pragma once

#include "config/ds_config.h"
#include "engine/observers/step_observer.h"

namespace dsx::engine {

class FlopsProfileWriter final : public StepObserver {
 public:
  // `forward_flops`: one micro-batch's forward pass; `params`: the model's; `ranks`: the job's.
  FlopsProfileWriter(const config::EngineConfig& config, double forward_flops, size_t params, int ranks, Say say)
      : config_(config), forward_flops_(forward_flops), params_(params), ranks_(ranks), say_(std::move(say)) {}
  void after_step(const StepEvent& event) override;

 private:
  const config::EngineConfig& config_;
  double forward_flops_;
  size_t params_;
  int ranks_;
  Say say_;
};

}  // namespace dsx::engine
