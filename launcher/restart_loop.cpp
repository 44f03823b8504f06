// The restart loop of restart_loop.h.
#include "launcher/restart_loop.h"

#include <iostream>

#include "dsx/error.h"

namespace dsx::launcher {

int run_with_restarts(int max_restarts, bool quiet,
                      const std::function<Outcome(int restart_count)>& attempt) {
  if (max_restarts < 0) {
    throw Error(ErrorKind::Usage,
                "--max_restarts " + std::to_string(max_restarts) + ": give 0 or more restarts");
  }
  for (int restart = 0;; ++restart) {
    const Outcome outcome = attempt(restart);
    if (outcome.exit_code == 0 || outcome.interrupted) return outcome.exit_code;
    if (restart == max_restarts) {
      if (max_restarts > 0 && !quiet) {
        std::cerr << "dsx launch: " << outcome.reason << "; no restarts left (" << max_restarts
                  << " of " << max_restarts << " used)" << std::endl;
      }
      return outcome.exit_code;
    }
    if (!quiet) {
      std::cerr << "dsx launch: " << outcome.reason << "; restarting the job (restart "
                << restart + 1 << " of " << max_restarts << ")" << std::endl;
    }
  }
}

}  // namespace dsx::launcher
