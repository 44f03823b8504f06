// The watchdog for a step that hangs outside any collective (a rank spinning in its own code, or
// blocked in I/O): a collective's own timeout and the stopped-rank check never see it. Each rank
// is handed a small file (DSX_PROGRESS_FILE) where it writes its step number after every step
// (`dsx train` does, engine/observers/progress_beat.h); the supervisor reads the files between
// polls. A rank whose number has not changed for the comm timeout beyond its slowest step so far
// is hung: the slowest step is added so that a hang inside a collective is still reported by the
// collective itself, with the peer it waits for, which fires within the timeout of its wait.
// A rank that never wrote (not dsx train, or still setting up) is not watched, nor one that wrote
// "end" (its loop is over: the final save and the summary are not steps).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

namespace dsx::launcher {

// A private directory for one start of a node's ranks, removed with the object.
class ProgressDirectory {
 public:
  ProgressDirectory();
  ~ProgressDirectory();
  ProgressDirectory(const ProgressDirectory&) = delete;
  ProgressDirectory& operator=(const ProgressDirectory&) = delete;
  // The file for the member named `rank` ("rank 3" -> .../rank3); "" when no directory could be made.
  std::string file_for(const std::string& rank) const;

 private:
  std::string path_;
};

class ProgressWatch {
 public:
  using Clock = std::chrono::steady_clock;
  explicit ProgressWatch(std::string path) : path_(std::move(path)) {}
  // Reads the file; returns why the rank counts as hung at `now`, or nothing.
  std::optional<std::string> check(Clock::time_point now, int timeout_s);
  int64_t last_step() const { return step_; }

 private:
  std::string path_;
  int64_t step_ = -1;  // -1: nothing written yet (not watched)
  Clock::time_point changed_{};
  double slowest_s_ = 0;  // the longest time between two steps so far
  bool ended_ = false;
};

}  // namespace dsx::launcher
