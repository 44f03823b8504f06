// run_node_check of node_check.h.
#include "launcher/node_check.h"

#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <sstream>

#include "launcher/env_export.h"
#include "launcher/process.h"

namespace dsx::launcher {
namespace {

using Clock = std::chrono::steady_clock;

std::string this_binary() {
  char self[PATH_MAX];
  const ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
  return n > 0 ? std::string(self, static_cast<size_t>(n)) : "/proc/self/exe";
}

// All the child writes, until it closes its output or `deadline`; false at the deadline.
bool read_until_closed(int fd, Clock::time_point deadline, std::string& text) {
  char buf[4096];
  while (true) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) return false;
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return true;
    text.append(buf, static_cast<size_t>(n));
  }
}

// The "dsx report: ..." lines that name an error, joined.
std::string error_lines(const std::string& output) {
  std::istringstream in(output);
  std::string joined;
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line == "dsx report: no errors") continue;
    joined += (joined.empty() ? "" : "; ") + line;
  }
  return joined;
}

}  // namespace

NodeCheck run_node_check(std::chrono::seconds timeout) {
  SpawnSpec spec;
  spec.argv = {this_binary(), "report", "--check"};
  spec.env = current_environment();
  const Child child = spawn_child(spec);
  if (child.exec_errno) {
    return {false, "cannot run '" + spec.argv[0] + " report --check': " + std::strerror(child.exec_errno)};
  }
  std::string output;
  const bool finished = read_until_closed(child.output_fd, Clock::now() + timeout, output);
  ::close(child.output_fd);
  if (!finished) signal_tree(child.pid, SIGKILL);
  int status = 0;
  ::waitpid(child.pid, &status, 0);
  if (!finished) {
    return {false, "'dsx report --check' did not finish within " + std::to_string(timeout.count()) + " s"};
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return {};
  const std::string errors = error_lines(output);
  return {false, errors.empty() ? "'dsx report --check' failed (status " + std::to_string(status) + ")" : errors};
}

}  // namespace dsx::launcher
