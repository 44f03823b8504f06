// See shm_cleanup.h.
#include "launcher/shm_cleanup.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>

namespace dsx::launcher {
namespace {

// The pid a region is named after, or -1 when the name is not "<digits>:...".
pid_t owner_pid(const std::string& name) {
  const size_t colon = name.find(':');
  if (colon == 0 || colon == std::string::npos || colon > 9) return -1;
  for (size_t i = 0; i < colon; ++i) {
    if (name[i] < '0' || name[i] > '9') return -1;
  }
  return static_cast<pid_t>(std::atol(name.substr(0, colon).c_str()));
}

}  // namespace

void remove_shm_regions_of(pid_t pid, const std::string& dir) {
  if (pid <= 0) return;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    if (owner_pid(entry.path().filename().string()) == pid) std::filesystem::remove(entry.path(), ec);
  }
}

int remove_orphaned_shm_regions(const std::string& dir) {
  int removed = 0;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const pid_t pid = owner_pid(entry.path().filename().string());
    struct stat st {};
    if (pid <= 0 || ::stat(entry.path().c_str(), &st) != 0 || st.st_uid != ::geteuid()) continue;
    if (::kill(pid, 0) == 0 || errno != ESRCH) continue;  // alive, or not ours to judge
    std::error_code removed_ec;
    if (std::filesystem::remove(entry.path(), removed_ec)) ++removed;
  }
  return removed;
}

}  // namespace dsx::launcher
