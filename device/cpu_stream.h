// The cpu device's streams and events (internal to device/): a stream is either the calling
// thread (inline: work runs at once) or a worker thread with a queue. A failure of a worker's
// work is kept (the first one) and fails every event recorded after it, so streams that wait for
// them fail too instead of computing on bad data; synchronize() rethrows it.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <thread>

#include "device/device.h"
#include "device/stream_checker.h"
#include "dsx/error.h"

namespace dsx::device::cpu {

// A point in a queue: signalled once the queue reaches it, with the queue's failure if any.
class Fence {
 public:
  void signal(const std::optional<Error>& error);
  // False when `timeout` passed first; rethrows nothing (see error()).
  bool wait_for(std::chrono::milliseconds timeout);
  std::optional<Error> error();
  // When signal() ran (the queue reached the point).
  std::chrono::steady_clock::time_point signalled_at();

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  bool done_ = false;
  std::chrono::steady_clock::time_point signalled_at_{};
  std::optional<Error> error_;
};

class CpuEvent final : public Event {
 public:
  std::shared_ptr<Fence> fence;  // the latest record; null: never recorded
  StreamChecker::Clock clock;    // the recording stream's clock then (with the checker)
  std::string recorded_on;
};

class CpuStream final : public Stream {
 public:
  // `checker` may be null.
  CpuStream(std::string name, bool inline_stream, StreamChecker* checker, unsigned max_delay_us,
            uint64_t seed, std::chrono::milliseconds timeout);
  ~CpuStream() override;

  const std::string& name() const override { return name_; }
  void record(Event& event) override;
  void wait(Event& event) override;
  void synchronize(std::chrono::milliseconds timeout) override;

  int actor() const { return actor_; }
  // Runs `work` in stream order (at once when inline; a throw then reaches the caller).
  void enqueue(std::function<void()> work);

 private:
  struct Item {
    std::function<void()> work;
    bool always = false;  // runs even after a failure (fences, so waiters never hang)
  };
  void push(Item item);
  void run_worker();
  void fail(const Error& error);
  std::optional<Error> failure();

  std::string name_;
  bool inline_;
  StreamChecker* checker_;
  int actor_ = StreamChecker::kHost;
  unsigned max_delay_us_;
  std::mt19937_64 rng_;
  std::chrono::milliseconds timeout_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<Item> queue_;
  bool stopping_ = false;
  std::optional<Error> error_;
  std::thread worker_;
};

CpuStream& as_cpu(Stream& stream);
CpuEvent& as_cpu(Event& event);

}  // namespace dsx::device::cpu
