// Runs one function as N ranks in N forked child processes, the way a launcher would start
// them, and always cleans up: children still running when the test ends (pass or fail) are
// SIGKILLed and reaped. A child's exit code is its verdict; its stderr stays visible in the log.
// Fork only from a single-threaded test body (no store server or worker threads alive).
#pragma once

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <exception>
#include <functional>
#include <thread>
#include <vector>

namespace dsx::test {

class RankProcesses {
 public:
  // Starts `world_size` children; child r runs body(r) and exits 0 if it returns normally, 1 if
  // it throws (after printing the exception).
  RankProcesses(int world_size, const std::function<void(int rank)>& body) {
    for (int r = 0; r < world_size; ++r) {
      std::fflush(nullptr);
      pid_t pid = ::fork();
      if (pid == 0) {
        int code = 0;
        try {
          body(r);
        } catch (const std::exception& e) {
          std::fprintf(stderr, "[rank %d] %s\n", r, e.what());
          code = 1;
        }
        std::fflush(nullptr);
        ::_exit(code);
      }
      pids_.push_back(pid);
      codes_.push_back(-1);
    }
  }

  ~RankProcesses() {
    for (size_t i = 0; i < pids_.size(); ++i) {
      if (codes_[i] != -1 || pids_[i] <= 0) continue;
      ::kill(pids_[i], SIGKILL);
      int status;
      ::waitpid(pids_[i], &status, 0);
    }
  }

  pid_t pid(int rank) const { return pids_[static_cast<size_t>(rank)]; }

  // Waits for every child (except those in `not_waiting_for`: ranks a test froze) up to
  // `timeout`; returns the exit codes (128+signal for a signal, -1 for a child still running,
  // which the destructor then kills).
  // `stop_early(codes)` may end the wait sooner (e.g. once a rank's failure dooms the others).
  std::vector<int> wait(std::chrono::milliseconds timeout, const std::vector<int>& not_waiting_for = {},
                        const std::function<bool(const std::vector<int>&)>& stop_early = {}) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      bool running = false;
      for (size_t i = 0; i < pids_.size(); ++i) {
        if (codes_[i] != -1) continue;
        int status;
        pid_t done = ::waitpid(pids_[i], &status, WNOHANG);
        if (done == pids_[i]) {
          codes_[i] = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        } else if (std::find(not_waiting_for.begin(), not_waiting_for.end(), static_cast<int>(i)) == not_waiting_for.end()) {
          running = true;
        }
      }
      if (!running || std::chrono::steady_clock::now() > deadline || (stop_early && stop_early(codes_))) return codes_;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }

 private:
  std::vector<pid_t> pids_;
  std::vector<int> codes_;
};

}  // namespace dsx::test
