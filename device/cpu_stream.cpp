// The cpu device's streams and events (see cpu_stream.h).
#include "device/cpu_stream.h"

#include <utility>

#include "trace/trace.h"

namespace dsx::device::cpu {

void Fence::signal(const std::optional<Error>& error) {
  {
    std::lock_guard lock(mutex_);
    done_ = true;
    error_ = error;
    signalled_at_ = std::chrono::steady_clock::now();
  }
  cv_.notify_all();
}

std::chrono::steady_clock::time_point Fence::signalled_at() {
  std::lock_guard lock(mutex_);
  return signalled_at_;
}

bool Fence::wait_for(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  return cv_.wait_for(lock, timeout, [this] { return done_; });
}

std::optional<Error> Fence::error() {
  std::lock_guard lock(mutex_);
  return error_;
}

CpuStream::CpuStream(std::string name, bool inline_stream, StreamChecker* checker,
                     unsigned max_delay_us, uint64_t seed, std::chrono::milliseconds timeout)
    : name_(std::move(name)),
      inline_(inline_stream),
      checker_(checker),
      max_delay_us_(max_delay_us),
      rng_(seed),
      timeout_(timeout) {
  if (checker_) actor_ = checker_->add_actor("stream '" + name_ + "'");
  if (!inline_) worker_ = std::thread([this] { run_worker(); });
}

CpuStream::~CpuStream() {
  if (!worker_.joinable()) return;
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;  // the queue still runs to its end: frees and fences must happen
  }
  cv_.notify_all();
  worker_.join();
}

void CpuStream::push(Item item) {
  {
    std::lock_guard lock(mutex_);
    queue_.push_back(std::move(item));
  }
  cv_.notify_one();
}

void CpuStream::enqueue(std::function<void()> work) {
  if (inline_) {
    work();
    return;
  }
  push({std::move(work), false});
}

void CpuStream::run_worker() {
  trace::name_this_thread("stream " + name_);
  std::uniform_int_distribution<unsigned> delay(0, max_delay_us_);
  for (;;) {
    Item item;
    {
      std::unique_lock lock(mutex_);
      cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;
      item = std::move(queue_.front());
      queue_.pop_front();
    }
    if (max_delay_us_ > 0) std::this_thread::sleep_for(std::chrono::microseconds(delay(rng_)));
    if (!item.always && failure()) continue;
    try {
      item.work();
    } catch (const Error& e) {
      fail(e);
    } catch (const std::exception& e) {
      fail(Error(ErrorKind::Internal, "work on stream '" + name_ + "' failed: " + e.what()));
    }
  }
}

void CpuStream::fail(const Error& error) {
  std::lock_guard lock(mutex_);
  if (!error_) error_ = error;
}

std::optional<Error> CpuStream::failure() {
  std::lock_guard lock(mutex_);
  return error_;
}

void CpuStream::record(Event& event) {
  CpuEvent& e = as_cpu(event);
  auto fence = std::make_shared<Fence>();
  e.fence = fence;
  e.recorded_on = name_;
  if (checker_) e.clock = checker_->snapshot(actor_);
  if (inline_) {
    fence->signal(std::nullopt);
    return;
  }
  push({[this, fence] { fence->signal(failure()); }, true});
}

void CpuStream::wait(Event& event) {
  CpuEvent& e = as_cpu(event);
  std::shared_ptr<Fence> fence = e.fence;
  if (!fence) return;
  if (checker_) checker_->merge(actor_, e.clock);
  const std::string what = "stream '" + name_ + "' waited " +
                           std::to_string(timeout_.count() / 1000) + " s for an event of stream '" +
                           e.recorded_on + "'";
  if (inline_) {
    if (!fence->wait_for(timeout_))
      throw Error(ErrorKind::Timeout, what + "; that stream is stuck or too slow");
    if (auto error = fence->error()) throw *error;
    if (checker_) checker_->merge(StreamChecker::kHost, e.clock);  // the host itself waited
    return;
  }
  push({[this, fence, what] {
          if (!fence->wait_for(timeout_)) {
            fail(Error(ErrorKind::Timeout, what + "; that stream is stuck or too slow"));
          } else if (auto error = fence->error()) {
            fail(*error);
          }
        },
        true});
}

void CpuStream::synchronize(std::chrono::milliseconds timeout) {
  if (inline_ && checker_) checker_->merge(StreamChecker::kHost, checker_->snapshot(actor_));
  if (!inline_) {
    auto fence = std::make_shared<Fence>();
    push({[this, fence] { fence->signal(failure()); }, true});
    if (!fence->wait_for(timeout)) {
      throw Error(ErrorKind::Timeout,
                  "waited " + std::to_string(timeout.count() / 1000) + " s for stream '" + name_ +
                      "' to finish its work; a collective on it may wait for a dead or slow peer");
    }
    if (checker_) checker_->merge(StreamChecker::kHost, checker_->snapshot(actor_));
  }
  if (auto error = failure()) throw *error;
}

CpuStream& as_cpu(Stream& stream) {
  auto* s = dynamic_cast<CpuStream*>(&stream);
  if (!s)
    throw Error(ErrorKind::Internal, "stream '" + stream.name() + "' is not a cpu device stream");
  return *s;
}

CpuEvent& as_cpu(Event& event) {
  auto* e = dynamic_cast<CpuEvent*>(&event);
  if (!e)
    throw Error(ErrorKind::Internal, "an event of another device was handed to the cpu device");
  return *e;
}

}  // namespace dsx::device::cpu
