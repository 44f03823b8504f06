// The rank's side of the launcher's watchdog for a step that hangs outside any collective
// (launcher/progress_watch.h): after every optimizer step, the step number is written to the
// file the launcher names in DSX_PROGRESS_FILE, and once when the loop starts; "end" after the
// last step (what follows, the final save, is not watched). Nothing happens
// without the variable (a rank started by hand, or by another launcher).
//
// Test hook: DSX_TEST_SPIN_AT_STEP=K makes the first start of the job (TORCHELASTIC_RESTART_COUNT
// 0 or unset) spin in its own code after step K, as a rank stuck in a loop would; only tests set it.
#pragma once

#include <cstdint>

#include "engine/observers/step_observer.h"

namespace dsx::engine {

class ProgressBeat final : public StepObserver {
 public:
  // Opens DSX_PROGRESS_FILE, if set, and writes `first_step` (the step the loop starts from).
  explicit ProgressBeat(int64_t first_step);
  ~ProgressBeat() override;
  ProgressBeat(const ProgressBeat&) = delete;
  ProgressBeat& operator=(const ProgressBeat&) = delete;
  void after_step(const StepEvent& event) override;

 private:
  void write_step(int64_t step);
  int fd_ = -1;
  int64_t spin_at_ = -1;  // the test hook's step (-1: off)
};

}  // namespace dsx::engine
