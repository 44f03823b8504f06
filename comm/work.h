// An operation in flight (c10d's Work): the caller holds it, the backend completes or fails it.
// wait() blocks with a timeout and rethrows the operation's error, which names the operation,
// the rank and the peer.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "dsx/error.h"

namespace dsx::comm {

class Work {
 public:
  // `description`: "allreduce #12 (fp32, 1048576 elements)" - used in timeout messages.
  // `default_timeout`: what wait() without an argument allows.
  Work(std::string description, std::chrono::milliseconds default_timeout);

  // Blocks until the operation finished or `timeout` passed. Rethrows the operation's error; throws
  // Timeout if it is still running (it keeps running: wait again or let the backend's own
  // deadline fail it).
  void wait(std::chrono::milliseconds timeout);
  void wait() { wait(default_timeout_); }
  // True once finished, successfully or not (never blocks).
  bool done() const;
  // When the operation finished (valid once done()): how ZeRO measures communication hidden
  // behind backward.
  std::chrono::steady_clock::time_point finished_at() const;
  const std::string& description() const { return description_; }

  // Backend side: called exactly once.
  void complete();
  void fail(const Error& error);
  // Backend side, before the Work is handed out: run at the start of every wait() and done(),
  // for a backend that issues operations lazily (nccl groups send/recv until someone waits).
  void set_before_wait(std::function<void()> issue) { before_wait_ = std::move(issue); }

 private:
  std::string description_;
  std::chrono::milliseconds default_timeout_;
  std::function<void()> before_wait_;
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  bool done_ = false;
  std::chrono::steady_clock::time_point finished_at_{};
  std::optional<Error> error_;
};

using WorkHandle = std::shared_ptr<Work>;

}  // namespace dsx::comm
