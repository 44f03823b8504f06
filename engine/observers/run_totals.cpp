// See run_totals.h.
#include "engine/observers/run_totals.h"

namespace dsx::engine {

void RunTotals::after_step(const StepEvent& event) {
  const TrainStep& step = event.step;
  summary_.tokens += step.tokens;
  summary_.samples += step.samples;
  if (!summary_.first_loss) summary_.first_loss = step.loss;
  summary_.final_loss = step.loss;
  if (!summary_.lowest_loss || step.loss < *summary_.lowest_loss) {
    summary_.lowest_loss = step.loss;
    summary_.lowest_loss_step = step.global_step;
  }
}

}  // namespace dsx::engine
