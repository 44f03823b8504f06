// Work handles (see work.h).
#include "comm/work.h"

namespace dsx::comm {

Work::Work(std::string description, std::chrono::milliseconds default_timeout)
    : description_(std::move(description)), default_timeout_(default_timeout) {}

void Work::wait(std::chrono::milliseconds timeout) {
  if (before_wait_) before_wait_();
  std::unique_lock lock(mutex_);
  if (!cv_.wait_for(lock, timeout, [this] { return done_; })) {
    throw Error(ErrorKind::Timeout, description_ + " is still running after " + std::to_string(timeout.count()) +
                                        " ms of waiting");
  }
  if (error_) throw *error_;
}

bool Work::done() const {
  if (before_wait_) before_wait_();
  std::lock_guard lock(mutex_);
  return done_;
}

std::chrono::steady_clock::time_point Work::finished_at() const {
  std::lock_guard lock(mutex_);
  return finished_at_;
}

void Work::complete() {
  {
    std::lock_guard lock(mutex_);
    finished_at_ = std::chrono::steady_clock::now();
    done_ = true;
  }
  cv_.notify_all();
}

void Work::fail(const Error& error) {
  {
    std::lock_guard lock(mutex_);
    error_ = error;
    finished_at_ = std::chrono::steady_clock::now();
    done_ = true;
  }
  cv_.notify_all();
}

}  // namespace dsx::comm
