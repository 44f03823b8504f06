// See flops_profile_writer.h.
#include "engine/observers/flops_profile_writer.h"

#include <fstream>
#include <sstream>

#include "engine/flops_profiler.h"

namespace dsx::engine {

void FlopsProfileWriter::after_step(const StepEvent& event) {
  const TrainStep& step = event.step;
  if (step.global_step != config_.flops_profiler.profile_step) return;
  FlopsProfile p;
  p.step = step.global_step;
  p.params = params_;
  p.forward_flops = forward_flops_;
  p.micro_batches = config_.gradient_accumulation_steps;
  p.forward_seconds = step.forward_seconds;
  p.backward_seconds = step.backward_seconds;
  p.step_seconds = step.step_seconds;
  p.iteration_seconds = step.total_seconds;
  p.samples = step.samples;
  p.ranks = ranks_;
  p.peak_flops_per_second = measured_sgemm_flops_per_second();
  const std::string report = format_flops_profile(p);
  if (config_.flops_profiler.output_file) {
    std::ofstream(*config_.flops_profiler.output_file) << report;
    say_("flops profile written to " + *config_.flops_profiler.output_file);
    return;
  }
  std::istringstream lines(report);
  for (std::string line; std::getline(lines, line);) say_(line);
}

}  // namespace dsx::engine
