// See divergence_guard.h.
#include "engine/observers/divergence_guard.h"

#include <cmath>
#include <sstream>
#include <string>

#include "dsx/error.h"

namespace dsx::engine {

void DivergenceGuard::after_step(const StepEvent& event) {
  run_ = std::isfinite(event.step.loss) ? 0 : run_ + 1;
  if (limit_ <= 0 || run_ < limit_) return;
  std::ostringstream lr;
  lr << event.step.lr;
  throw Error(ErrorKind::Numeric,
              "the loss has been NaN or inf for " + std::to_string(run_) + " consecutive steps (up to step " +
                  std::to_string(event.step.global_step) + ", lr " + lr.str() +
                  "): training diverged. Lower optimizer.params.lr, set gradient_clipping, or use fp32/bf16 "
                  "instead of fp16; --max_nonfinite_steps sets how many such steps a run tolerates (0: any)");
}

}  // namespace dsx::engine
