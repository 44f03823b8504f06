// torchrun's --max_restarts for every dsx launch: a job whose rank (or node) failed is stopped
// everywhere, as before, and then started again, up to `max_restarts` times. Only failures count
// and only failures restart: a signal to the launcher or a lost runner connection ends the job.
#pragma once

#include <functional>

#include "launcher/supervisor.h"

namespace dsx::launcher {

// Runs `attempt(n)` for n = 0, 1, ... until it succeeds, is interrupted, or has failed
// max_restarts + 1 times; returns the last attempt's exit code. Each restart is said on stderr
// (unless quiet) with the failure that caused it.
int run_with_restarts(int max_restarts, bool quiet,
                      const std::function<Outcome(int restart_count)>& attempt);

}  // namespace dsx::launcher
