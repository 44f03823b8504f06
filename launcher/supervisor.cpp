// The supervision loop: one poll() over the children's output, a signalfd (SIGCHLD and the
// stop signals) and, for remote agents, the tether to the runner.
#include "launcher/supervisor.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <iostream>
#include <optional>

#include "dsx/error.h"
#include "launcher/env_export.h"
#include "launcher/progress_watch.h"
#include "launcher/shm_cleanup.h"

namespace dsx::launcher {
namespace {

using Clock = std::chrono::steady_clock;
constexpr size_t kMaxLine = 1 << 16;  // output held back waiting for a newline, at most

struct Running {
  Member member;
  Child child;
  std::string partial;   // output after the last newline
  bool mid_line = false;  // part of the current line was already passed on (a progress bar)
  bool done = false;
  int status = 0;
  Clock::time_point stopped_since{};  // when it was first seen stopped ({}: running)
  int tee_fd = -1;  // a copy of the output goes here (torchrun's --tee)
  std::optional<ProgressWatch> progress{};  // ranks that may report their steps
};

int open_tee(const std::string& path) {
  if (path.empty()) return -1;
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw Error(ErrorKind::Io, "cannot open " + path + ": " + std::strerror(errno));
  return fd;
}

// True when `pid` is stopped by a signal (state T; t is a tracer's stop, which is left alone).
bool is_stopped(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat;
  std::getline(in, stat);
  const auto paren = stat.rfind(')');
  return paren != std::string::npos && paren + 2 < stat.size() && stat[paren + 2] == 'T';
}

bool write_all(int fd, const std::string& text) {
  size_t off = 0;
  while (off < text.size()) {
    ssize_t n = ::write(fd, text.data() + off, text.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    off += static_cast<size_t>(n);
  }
  return true;
}

// A carriage return sends the terminal's cursor back to the start of the line, over the prefix
// put there: a progress bar's redraws (and the lines it prints between them) get it again.
std::string prefixed_after_returns(const std::string& text, const std::string& prefix) {
  if (prefix.empty() || text.find('\r') == std::string::npos) return text;
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    out += text[i];
    if (text[i] == '\r' && (i + 1 == text.size() || text[i + 1] != '\n')) out += prefix;
  }
  return out;
}

int exit_code_of(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

std::string describe_status(int status) {
  if (WIFSIGNALED(status)) {
    return std::string("was killed by signal ") + std::to_string(WTERMSIG(status)) + " (" + strsignal(WTERMSIG(status)) + ")";
  }
  return "exited with code " + std::to_string(exit_code_of(status));
}

// Blocks the supervised signals for the lifetime of the loop and restores the mask after.
class SignalGuard {
 public:
  SignalGuard() {
    sigset_t set;
    sigemptyset(&set);
    for (int s : {SIGCHLD, SIGINT, SIGTERM, SIGHUP, SIGQUIT}) sigaddset(&set, s);
    ::sigprocmask(SIG_BLOCK, &set, &old_);
    fd_ = ::signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
    if (fd_ < 0) throw Error(ErrorKind::Launch, std::string("signalfd: ") + std::strerror(errno));
    old_pipe_ = ::signal(SIGPIPE, SIG_IGN);
  }
  ~SignalGuard() {
    ::close(fd_);
    ::signal(SIGPIPE, old_pipe_);
    ::sigprocmask(SIG_SETMASK, &old_, nullptr);
  }
  int fd() const { return fd_; }

 private:
  sigset_t old_;
  int fd_ = -1;
  sighandler_t old_pipe_;
};

class Job {
 public:
  Job(std::vector<Member> members, const SupervisorOptions& options)
      : options_(options), parent_(::getppid()) {
    for (auto& m : members) running_.push_back({std::move(m), {}, {}, false, 0});
  }

  Outcome run() {
    SignalGuard signals;
    for (auto& r : running_) {
      if (stopping_) break;
      hand_progress_file(r);
      r.child = spawn_child(r.member.spawn);
      if (r.child.exec_errno) {
        r.done = true;
        r.status = 127 << 8;
        fail(r.member.name + ": cannot start '" + r.member.spawn.argv[0] + "': " + std::strerror(r.child.exec_errno), 127);
      }
    }
    for (auto& r : running_)
      if (!r.child.exec_errno && r.child.pid < 0) r.done = true;  // never started (stopped first)
    add_stderr_readers();

    while (!all_done()) {
      poll_once(signals.fd());
      if (stopping_ && !killed_ && Clock::now() >= kill_at_) {
        kill_all("still running after " + std::to_string(options_.kill_grace_s) + " s; sending SIGKILL");
      }
      if (!stopping_ && options_.stopped_rank_timeout_s > 0) check_stopped_ranks();
      if (!stopping_ && options_.hung_step_timeout_s > 0) check_progress();
      if (killed_ && Clock::now() >= kill_at_ + std::chrono::seconds(10)) {
        message("some processes survived SIGKILL for 10 s (stuck in the kernel?); giving up on them");
        break;
      }
    }
    drain_all();
    return outcome_;
  }

 private:
  // A child whose stderr has a pipe of its own gets a second reader: an entry with no process
  // (done from the start), the same prefix, and the stderr tee file.
  void add_stderr_readers() {
    std::vector<Running> readers;
    for (auto& r : running_) {
      r.tee_fd = open_tee(r.member.tee_stdout_path);
      if (r.child.error_fd < 0) continue;
      Running reader{r.member, {}, {}, false, true, 0};
      reader.member.is_rank = false;
      reader.child.output_fd = r.child.error_fd;
      reader.tee_fd = open_tee(r.member.tee_stderr_path);
      r.child.error_fd = -1;
      readers.push_back(std::move(reader));
    }
    for (auto& reader : readers) running_.push_back(std::move(reader));
  }

  bool all_done() const {
    for (const auto& r : running_)
      if (!r.done) return false;
    return true;
  }

  void message(const std::string& text) {
    if (options_.quiet) return;
    // A rank's progress bar may be mid-line: end it, so that the message gets a line of its own
    // and the bar's next redraw starts a fresh one (with its prefix).
    bool ended = false;
    for (auto& r : running_) {
      if (!r.mid_line) continue;
      r.mid_line = false;
      ended = true;
    }
    if (ended) write_all(1, "\n");
    std::cerr << "dsx launch: " << text << std::endl;
  }

  // Records the first failure and starts stopping everybody.
  void fail(const std::string& reason, int code) {
    if (stopping_) return;
    outcome_ = {code, reason};
    message(reason + "; stopping all processes of the job");
    stop_all(SIGTERM);
  }

  // The watchdog for ranks that are alive but stopped (SIGSTOP): after the timeout, a failure.
  void check_stopped_ranks() {
    const auto now = Clock::now();
    for (auto& r : running_) {
      if (r.done || r.child.pid < 0 || !r.member.is_rank) continue;
      if (!is_stopped(r.child.pid)) {
        r.stopped_since = {};
        continue;
      }
      if (r.stopped_since == Clock::time_point{}) r.stopped_since = now;
      if (now - r.stopped_since < std::chrono::seconds(options_.stopped_rank_timeout_s)) continue;
      fail(r.member.name + " (pid " + std::to_string(r.child.pid) + ") has been stopped (SIGSTOP) for " +
               std::to_string(options_.stopped_rank_timeout_s) + " s (DSX_COMM_TIMEOUT); treating it as failed",
           128 + SIGSTOP);
      return;
    }
  }

  // A rank gets DSX_PROGRESS_FILE to write its step number into (progress_watch.h).
  void hand_progress_file(Running& r) {
    if (!r.member.is_rank || options_.hung_step_timeout_s <= 0) return;
    if (!progress_files_) progress_files_.emplace();
    const std::string path = progress_files_->file_for(r.member.name);
    if (path.empty()) return;
    env_set(r.member.spawn.env, "DSX_PROGRESS_FILE", &path);
    r.progress.emplace(path);
  }

  // The watchdog for a step that hangs outside any collective: a rank that reported steps and
  // stopped reporting them is failed like a dead one.
  void check_progress() {
    const auto now = Clock::now();
    for (auto& r : running_) {
      if (r.done || r.child.pid < 0 || !r.progress) continue;
      const auto hung = r.progress->check(now, options_.hung_step_timeout_s);
      if (!hung || is_stopped(r.child.pid)) continue;  // a stopped rank has its own check
      return fail(r.member.name + " (pid " + std::to_string(r.child.pid) + ") " + *hung, 124);
    }
  }

  void stop_all(int sig) {
    stopping_ = true;
    kill_at_ = Clock::now() + std::chrono::seconds(options_.kill_grace_s);
    for (auto& r : running_) {
      if (r.done || r.child.pid < 0) continue;
      if (r.member.stop_by_closing_stdin && r.child.stdin_fd >= 0) {
        ::close(r.child.stdin_fd);
        r.child.stdin_fd = -1;
      } else {
        signal_tree(r.child.pid, sig);
        signal_tree(r.child.pid, SIGCONT);  // a stopped process acts on the signal only once continued
      }
    }
  }

  // SIGKILL to everything still running; `why` says so for each (the grace ran out, or a second
  // interrupt asked for it).
  void kill_all(const std::string& why) {
    killed_ = true;
    kill_at_ = Clock::now();
    for (auto& r : running_) {
      if (!r.done && r.child.pid > 0) {
        message(r.member.name + " (pid " + std::to_string(r.child.pid) + ") " + why);
        signal_tree(r.child.pid, SIGKILL);
      }
    }
  }

  void poll_once(int signal_fd) {
    std::vector<pollfd> fds;
    std::vector<Running*> owners;
    fds.push_back({signal_fd, POLLIN, 0});
    owners.push_back(nullptr);
    for (auto& r : running_) {
      if (r.child.output_fd >= 0) {
        fds.push_back({r.child.output_fd, POLLIN, 0});
        owners.push_back(&r);
      }
    }
    size_t tether_stdin = 0, tether_stdout = 0;
    if (options_.tether_stdin && !tether_lost_) {
      tether_stdin = fds.size();
      fds.push_back({0, POLLIN, 0});
      owners.push_back(nullptr);
    }
    if (options_.tether_parent && !tether_lost_) {
      tether_stdout = fds.size();
      fds.push_back({1, 0, 0});  // only POLLERR/POLLHUP: the reader of our output is gone
      owners.push_back(nullptr);
    }
    size_t stop_at = 0;
    if (options_.stop_fd >= 0 && !outcome_.stopped_by_fd) {
      stop_at = fds.size();
      fds.push_back({options_.stop_fd, POLLIN, 0});
      owners.push_back(nullptr);
    }
    int n = ::poll(fds.data(), fds.size(), 200);
    if (n < 0 && errno != EINTR) throw Error(ErrorKind::Launch, std::string("poll: ") + std::strerror(errno));
    for (size_t i = 1; n > 0 && i < fds.size(); ++i) {
      if (!fds[i].revents) continue;
      if (owners[i]) {
        read_output(*owners[i]);
      } else if (i == tether_stdin) {
        read_tether();
      } else if (i == tether_stdout) {
        lose_tether("the connection to the runner closed (stdout hung up)");
      } else if (i == stop_at) {
        stop_from_fd();
      }
    }
    if (fds[0].revents) read_signals(signal_fd);
    reap();
    if (options_.tether_parent && !tether_lost_ && ::getppid() != parent_) {
      lose_tether("the process that started this agent exited");
    }
  }

  void stop_from_fd() {
    if (stopping_) {
      outcome_.stopped_by_fd = true;
      return;
    }
    outcome_ = {1, "the job is stopping on another node"};
    outcome_.stopped_by_fd = true;
    stop_all(SIGTERM);
  }

  void lose_tether(const std::string& why) {
    tether_lost_ = true;
    if (!stopping_) {
      outcome_ = {129, why, true};
      message(why + "; stopping the ranks of this node");
      stop_all(SIGTERM);
    }
  }

  void read_tether() {
    char buf[256];
    ssize_t n = ::read(0, buf, sizeof buf);
    if (n < 0 && errno == EINTR) return;
    if (n <= 0) {
      lose_tether("the runner closed the connection");
    } else if (std::string(buf, n).find("stop") != std::string::npos) {
      lose_tether("the runner asked to stop");
    }
  }

  void read_signals(int signal_fd) {
    signalfd_siginfo info;
    while (::read(signal_fd, &info, sizeof info) == sizeof info) {
      int sig = static_cast<int>(info.ssi_signo);
      if (sig == SIGCHLD) continue;
      if (stopping_) {
        if (!killed_) {
          message(std::string("second ") + strsignal(sig) + ": killing everything now");
          kill_all("still running; sending SIGKILL (second " + std::string(strsignal(sig)) + ")");
        }
        continue;
      }
      outcome_ = {128 + sig, std::string("received ") + strsignal(sig), true};
      message(outcome_.reason + "; forwarding it to every process and stopping the job");
      stop_all(sig == SIGHUP ? SIGTERM : sig);
    }
  }

  void reap() {
    for (auto& r : running_) {
      if (r.done || r.child.pid < 0) continue;
      int status = 0;
      pid_t got = ::waitpid(r.child.pid, &status, WNOHANG);
      if (got != r.child.pid) continue;
      r.done = true;
      r.status = status;
      if (r.member.is_rank) remove_shm_regions_of(r.child.pid);  // a killed rank leaves them
      if (r.child.stdin_fd >= 0) {
        ::close(r.child.stdin_fd);
        r.child.stdin_fd = -1;
      }
      if (status != 0) fail(r.member.name + " (pid " + std::to_string(r.child.pid) + ") " + describe_status(status), exit_code_of(status));
    }
  }

  void read_output(Running& r) {
    char buf[65536];
    ssize_t n = ::read(r.child.output_fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) return;
    if (n <= 0) {
      flush_partial(r);
      ::close(r.child.output_fd);
      r.child.output_fd = -1;
      return;
    }
    if (r.tee_fd >= 0) write_all(r.tee_fd, std::string(buf, static_cast<size_t>(n)));
    r.partial.append(buf, n);
    size_t start = 0, nl;
    std::string out;
    while ((nl = r.partial.find('\n', start)) != std::string::npos) {
      std::string line = r.partial.substr(start, nl - start);
      if (r.member.watch_failure_marker) check_marker(r, line);
      out += (r.mid_line ? "" : r.member.prefix) + prefixed_after_returns(line, r.member.prefix) + "\n";
      r.mid_line = false;
      start = nl + 1;
    }
    r.partial.erase(0, start);
    // A progress bar redraws its line after a carriage return and ends it only at the end: pass it
    // on now rather than at the next newline. So does output with no newline in sight.
    if (r.partial.find('\r') != std::string::npos || r.partial.size() > kMaxLine) {
      if (r.member.watch_failure_marker) check_marker(r, r.partial);
      out += (r.mid_line ? "" : r.member.prefix) + prefixed_after_returns(r.partial, r.member.prefix);
      r.mid_line = true;
      r.partial.clear();
    }
    if (!r.member.to_console) return;
    if (!write_all(1, out) && options_.tether_parent) lose_tether("the connection to the runner closed (stdout)");
  }

  void flush_partial(Running& r) {
    if (r.partial.empty() && !r.mid_line) return;
    if (r.member.watch_failure_marker) check_marker(r, r.partial);
    if (r.member.to_console) write_all(1, (r.mid_line ? "" : r.member.prefix) + prefixed_after_returns(r.partial, r.member.prefix) + "\n");
    r.partial.clear();
    r.mid_line = false;
  }

  void check_marker(Running& r, const std::string& line) {
    auto at = line.find(kAgentFailureMarker);
    if (at == std::string::npos) return;
    int code = std::atoi(line.c_str() + at + std::strlen(kAgentFailureMarker));
    fail(r.member.name + ": " + line.substr(0, at) + "a rank failed with exit code " + std::to_string(code), code ? code : 1);
  }

  void drain_all() {
    for (auto& r : running_) {
      while (r.child.output_fd >= 0) {
        pollfd p{r.child.output_fd, POLLIN, 0};
        // Grandchildren may hold the pipe open; take what is there and no more.
        if (::poll(&p, 1, 0) <= 0) {
          flush_partial(r);
          ::close(r.child.output_fd);
          r.child.output_fd = -1;
          break;
        }
        read_output(r);
      }
      if (r.child.stdin_fd >= 0) ::close(r.child.stdin_fd);
      r.child.stdin_fd = -1;
      if (r.tee_fd >= 0) ::close(r.tee_fd);
      r.tee_fd = -1;
    }
  }

  SupervisorOptions options_;
  std::optional<ProgressDirectory> progress_files_;  // made for the first rank that gets a file
  pid_t parent_;
  std::vector<Running> running_;
  Outcome outcome_;
  bool stopping_ = false;
  bool killed_ = false;
  bool tether_lost_ = false;
  Clock::time_point kill_at_{};
};

}  // namespace

int stopped_rank_timeout_from(const std::vector<EnvVar>& environment) {
  for (const char* name : {"DSX_COMM_TIMEOUT", "NCCL_TIMEOUT"}) {
    const std::string text = env_value(environment, name);
    const int seconds = std::atoi(text.c_str());
    if (seconds > 0) return seconds;
  }
  return 300;
}

Outcome supervise(std::vector<Member> members, const SupervisorOptions& options) {
  return Job(std::move(members), options).run();
}

}  // namespace dsx::launcher
