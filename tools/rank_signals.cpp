// See rank_signals.h.
#include "tools/rank_signals.h"

#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <thread>

namespace dsx::tools {

void end_promptly_on_signals() {
  // Only where the launcher asked for a parent-death signal (dsx launch does; it survives exec):
  // a process a user started by hand keeps running when its shell goes.
  int asked = 0;
  if (::prctl(PR_GET_PDEATHSIG, &asked) == 0 && asked != 0) ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  sigset_t stop;
  sigemptyset(&stop);
  for (int sig : {SIGTERM, SIGINT, SIGHUP, SIGQUIT}) sigaddset(&stop, sig);
  if (::pthread_sigmask(SIG_BLOCK, &stop, nullptr) != 0) return;
  std::thread([stop] {
    int sig = 0;
    while (::sigwait(&stop, &sig) != 0) {
    }
    // A progress bar may be mid-line on a terminal: end the line, then go.
    if (::isatty(STDOUT_FILENO) == 1) (void)!::write(STDOUT_FILENO, "\n", 1);
    ::_exit(128 + sig);
  }).detach();
}

}  // namespace dsx::tools
