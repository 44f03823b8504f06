// ProgressBeat of progress_beat.h.
#include "engine/observers/progress_beat.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

namespace dsx::engine {
namespace {

// DSX_TEST_SPIN_AT_STEP on the job's first start, else -1.
int64_t spin_hook() {
  const char* at = std::getenv("DSX_TEST_SPIN_AT_STEP");
  const char* restarts = std::getenv("TORCHELASTIC_RESTART_COUNT");
  if (!at || (restarts && std::atoi(restarts) > 0)) return -1;
  return std::atoll(at);
}

}  // namespace

ProgressBeat::ProgressBeat(int64_t first_step) : spin_at_(spin_hook()) {
  const char* path = std::getenv("DSX_PROGRESS_FILE");
  if (!path || !*path) return;
  // The launcher only reads it; a file that cannot be opened leaves the rank unwatched.
  fd_ = ::open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
  write_step(first_step);
}

ProgressBeat::~ProgressBeat() {
  if (fd_ >= 0) ::close(fd_);
}

void ProgressBeat::after_step(const StepEvent& event) {
  write_step(event.step.global_step);
  if (event.last && fd_ >= 0) (void)!::pwrite(fd_, "end\n", 4, 0);  // the launcher stops watching
  if (event.step.global_step != spin_at_) return;
  volatile uint64_t spins = 0;  // the test hook: busy in its own code, never returning
  while (true) spins = spins + 1;
}

// One fixed-width line written in place: the reader sees the old number or the new one, and a
// number without its newline (a write caught half-way) it ignores.
void ProgressBeat::write_step(int64_t step) {
  if (fd_ < 0) return;
  char line[24];
  const int n = std::snprintf(line, sizeof line, "%20lld\n", static_cast<long long>(step));
  (void)!::pwrite(fd_, line, static_cast<size_t>(n), 0);
}

}  // namespace dsx::engine
