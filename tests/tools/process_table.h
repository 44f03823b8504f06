// The command lines of the processes running now, read from /proc. A process may exit between the
// directory listing and the read (the read then fails with ESRCH); it is simply not listed.
#pragma once

#include <fcntl.h>
#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

namespace dsx::test {

// The NUL-separated command line of `pid`, or "" when it has gone (or is a kernel thread).
inline std::string command_line_of(pid_t pid) {
  std::string text;
  int fd = ::open(("/proc/" + std::to_string(pid) + "/cmdline").c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return text;
  char buf[4096];
  for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;) text.append(buf, static_cast<size_t>(n));
  ::close(fd);
  return text;
}

// The pids of the processes whose command line holds `needle`.
inline std::vector<pid_t> processes_mentioning(const std::string& needle) {
  std::vector<pid_t> pids;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/proc", ec)) {
    const std::string name = entry.path().filename().string();
    if (name.empty() || !std::all_of(name.begin(), name.end(), ::isdigit)) continue;
    const pid_t pid = static_cast<pid_t>(std::stol(name));
    if (command_line_of(pid).find(needle) != std::string::npos) pids.push_back(pid);
  }
  return pids;
}

}  // namespace dsx::test
