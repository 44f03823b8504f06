// Runs a set of child processes as one job and never leaves one behind: output is forwarded
// line by line with a prefix, the first child to fail (non-zero exit or killed by a signal)
// stops all others (SIGTERM to each child's process group, SIGKILL after a grace period),
// SIGINT/SIGTERM/SIGHUP/SIGQUIT to the supervisor do the same, and the exit code is the
// failing child's (128+N for signal N). Used by the node agent for ranks and by the ssh and
// pdsh runners for remote nodes. Children are tracked by pid, never by name.
#pragma once

#include <string>
#include <vector>

#include "launcher/process.h"

namespace dsx::launcher {

// A remote node agent prints this (after its host prefix) when one of its ranks failed, so that
// a runner that sees all nodes through one pdsh can stop the others at once.
inline constexpr const char* kAgentFailureMarker = "[dsx-agent] FAILED exit_code=";

struct Member {
  std::string name;    // for messages: "rank 3", "node 1 (127.0.0.2)"
  std::string prefix;  // put in front of every output line ("" = none)
  SpawnSpec spawn;
  // Stop by closing stdin first (a remote agent tears its node down on EOF) instead of SIGTERM.
  bool stop_by_closing_stdin = false;
  bool watch_failure_marker = false;  // output lines with kAgentFailureMarker count as a failure
  bool to_console = true;  // false: output read and dropped (torchrun's --local_ranks_filter)
  // torchrun's --tee: stdout / stderr also copied to these files ("" = not). Either one set also
  // needs spawn.separate_stderr, so that each file gets its own stream.
  std::string tee_stdout_path, tee_stderr_path;
  bool is_rank = false;  // a rank on this host: its libfabric shm regions are removed once it is reaped
};

struct SupervisorOptions {
  int kill_grace_s = 30;
  bool tether_stdin = false;   // stdin EOF or a "stop" line: stop everything (remote agent)
  bool tether_parent = false;  // parent gone or stdout hung up: stop everything (remote agent)
  bool quiet = false;          // no progress messages on stderr
  // Readable (a message or a hang-up): stop everything, unread; the caller reads why (the
  // torchrun-style agent's rendezvous connection).
  int stop_fd = -1;
  // A rank stopped (SIGSTOP, a debugger, state T in /proc) this long is failed like a dead one
  // (0: never): its peers would wait in their collectives until a person came.
  int stopped_rank_timeout_s = 0;
  // A rank that reports its steps (DSX_PROGRESS_FILE, progress_watch.h) and makes none for this
  // long beyond its slowest step is failed as hung (0: never).
  int hung_step_timeout_s = 0;
};

// The seconds a rank may stay stopped: DSX_COMM_TIMEOUT, else NCCL_TIMEOUT (seconds, as job
// scripts set it), else 300 s, the collectives' own timeout (docs/comm.md).
int stopped_rank_timeout_from(const std::vector<EnvVar>& environment);

struct Outcome {
  int exit_code = 0;
  std::string reason;  // empty on success
  bool interrupted = false;  // stopped by a signal to the supervisor or by its runner: never restarted
  bool stopped_by_fd = false;  // stopped because stop_fd became readable
};

Outcome supervise(std::vector<Member> members, const SupervisorOptions& options);

}  // namespace dsx::launcher
