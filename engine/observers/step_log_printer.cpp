// See step_log_printer.h.
#include "engine/observers/step_log_printer.h"

#include <chrono>
#include <sstream>

#include "engine/progress/step_log.h"

namespace dsx::engine {

void StepLogPrinter::after_step(const StepEvent& event) {
  const TrainStep& step = event.step;
  if (!config_.steps_per_print || step.global_step % *config_.steps_per_print != 0) return;
  const auto prefix = [&] { return progress::log_prefix(std::chrono::system_clock::now(), rank_); };
  progress::GroupState group{step.lr, trainer_.momentum()};
  say_(prefix() + progress::format_step_line(step.global_step, trainer_.skipped_steps(), {&group, 1}));
  if (!config_.wall_clock_breakdown) return;
  std::ostringstream w;
  w.precision(2);
  w << std::fixed << "time (ms) | fwd: " << step.forward_seconds * 1e3 << " | bwd: " << step.backward_seconds * 1e3
    << " | step: " << step.step_seconds * 1e3 << " | comm wait: " << event.comm_wait * 1e3
    << " | comm hidden behind backward: " << trainer_.zero().comm_timing().hidden_fraction() * 100 << "%";
  say_(prefix() + w.str());
}

}  // namespace dsx::engine
