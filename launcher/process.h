// Starting one supervised child: its own process group (so that stopping it also stops what it
// started), the signals the supervisor blocks unblocked again, output to a pipe or a file, an
// optional CPU set, and SIGTERM when the supervisor dies. exec failures come back as an errno
// instead of a silent exit 127.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "launcher/rank_env.h"

namespace dsx::launcher {

struct SpawnSpec {
  std::vector<std::string> argv;
  std::vector<EnvVar> env;     // the complete environment of the child
  std::string log_path;        // non-empty: stdout and stderr appended to this file
  std::string stdout_path;     // non-empty: stdout (only) to this file, stderr as above
  std::string stderr_path;     // non-empty: stderr (only) to this file
  bool separate_stderr = false;  // stderr to a pipe of its own (Child::error_fd), not with stdout
  bool stdin_pipe = false;     // stdin is a pipe the parent writes (else /dev/null)
  std::string stdin_text;      // with stdin_pipe: written first (small: it fits the pipe's buffer)
  std::vector<int> cpus;       // non-empty: sched_setaffinity to these CPUs before exec
  // A process group of its own (stopping the child stops what it started). Off under a
  // scheduler that tracks the job by the process group it created (Slurm's proctrack/pgid).
  bool own_process_group = true;
};

struct Child {
  pid_t pid = -1;
  int output_fd = -1;  // read end of stdout+stderr, -1 with log_path
  int error_fd = -1;   // read end of stderr with separate_stderr
  int stdin_fd = -1;   // write end of stdin, -1 unless stdin_pipe
  int exec_errno = 0;  // non-zero: the program could not be started (pid already reaped)
};

// Every process below `root` (children, grandchildren, ...), found through /proc. Backends such
// as pdsh put their ssh clients in other process groups; stopping by tree reaches them too.
std::vector<pid_t> descendants(pid_t root);

// Sends `sig` to the process group of `leader` (or to `leader` alone when it leads none) and to
// every descendant of `leader`.
void signal_tree(pid_t leader, int sig);

// Never throws for a missing program: see Child::exec_errno. Throws dsx::Error(Io/Launch) when
// the log file cannot be opened or fork fails.
Child spawn_child(const SpawnSpec& spec);

}  // namespace dsx::launcher
