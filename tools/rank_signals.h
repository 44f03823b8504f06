// How a rank program (dsx train) ends when it is told to, at any moment of its life. A library's
// own signal handler can deadlock when the signal lands inside a call of that library: libfabric's
// shm provider handles SIGTERM by calling exit(), whose destructors then wait for a lock that the
// interrupted fi_getinfo holds - and a rank whose launcher was killed stayed alive forever. So:
//   - a parent-death signal the launcher set becomes SIGKILL: a rank never outlives its launcher;
//   - SIGTERM, SIGINT, SIGHUP and SIGQUIT are blocked and taken by one thread of our own, which
//     ends the process at once with _exit(128 + signal): no destructor runs inside a library call.
// Checkpoint files are written atomically, and the launcher removes the shm regions left behind.
#pragma once

namespace dsx::tools {

// Call first, before any thread starts (threads inherit the blocked signals).
void end_promptly_on_signals();

}  // namespace dsx::tools
