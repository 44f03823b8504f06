// ProgressDirectory and ProgressWatch of progress_watch.h.
#include "launcher/progress_watch.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string_view>

namespace dsx::launcher {

ProgressDirectory::ProgressDirectory() {
  const char* tmp = std::getenv("TMPDIR");
  std::string tmpl = std::string(tmp && *tmp ? tmp : "/tmp") + "/dsx_progress_XXXXXX";
  if (::mkdtemp(tmpl.data())) path_ = tmpl;  // without it the watchdog is off, the job runs
}

ProgressDirectory::~ProgressDirectory() {
  std::error_code ec;
  if (!path_.empty()) std::filesystem::remove_all(path_, ec);
}

std::string ProgressDirectory::file_for(const std::string& rank) const {
  if (path_.empty()) return "";
  std::string name = rank;
  std::erase(name, ' ');
  return path_ + "/" + name;
}

namespace {

constexpr int64_t kNothing = -1, kEnded = -2;

// The step number the rank last wrote; kEnded after its last step; else kNothing (no file yet,
// or a write caught half-way).
int64_t read_step(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  char text[32] = {};
  const ssize_t n = ::pread(fd, text, sizeof text - 1, 0);
  ::close(fd);
  if (n <= 0) return kNothing;
  if (std::string_view(text).find("end\n") != std::string_view::npos) return kEnded;
  char* end = nullptr;
  const long long step = std::strtoll(text, &end, 10);
  return end != text && *end == '\n' ? step : kNothing;
}

}  // namespace

std::optional<std::string> ProgressWatch::check(Clock::time_point now, int timeout_s) {
  if (ended_) return std::nullopt;
  const int64_t step = read_step(path_);
  if (step == kEnded) ended_ = true;
  if (step < 0) return std::nullopt;
  if (step != step_) {
    if (step_ >= 0) slowest_s_ = std::max(slowest_s_, std::chrono::duration<double>(now - changed_).count());
    step_ = step;
    changed_ = now;
    return std::nullopt;
  }
  const double still = std::chrono::duration<double>(now - changed_).count();
  const double limit = timeout_s + slowest_s_;
  if (still < limit) return std::nullopt;
  char why[200];
  std::snprintf(why, sizeof why,
                "made no progress for %.1f s after step %lld (DSX_COMM_TIMEOUT, %d s, beyond its "
                "slowest step, %.1f s); treating it as hung",
                still, static_cast<long long>(step_), timeout_s, slowest_s_);
  return std::string(why);
}

}  // namespace dsx::launcher
