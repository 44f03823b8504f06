// libfabric's shm provider keeps each endpoint's region in /dev/shm as "<pid>:<domain>:<endpoint>"
// (16 MiB) and removes it on a clean close; a rank that is killed leaves it behind, and a later
// process given the same pid then fails to open its endpoint. The launcher knows its ranks' pids:
// it removes a rank's regions once the rank is reaped, and at start-up the regions of this user
// whose process is gone.
#pragma once

#include <sys/types.h>

#include <string>

namespace dsx::launcher {

// Removes `dir`/<pid>:* (default /dev/shm). Only for a pid that has been reaped: no living
// process can own them then.
void remove_shm_regions_of(pid_t pid, const std::string& dir = "/dev/shm");

// Removes `dir`/<pid>:* owned by this user whose pid names no living process. Returns how many.
int remove_orphaned_shm_regions(const std::string& dir = "/dev/shm");

}  // namespace dsx::launcher
