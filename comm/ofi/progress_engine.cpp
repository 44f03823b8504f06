// The ofi backend's worker thread, request table and deadline-bounded waits (see progress_engine.h).
#include "comm/ofi/progress_engine.h"

#include <rdma/fi_errno.h>
#include <sched.h>

#include <algorithm>
#include <cstdio>
#include <sstream>
#include <thread>

#include "trace/trace.h"

namespace dsx::comm::ofi {

namespace {

// How often a waiting operation asks the store whether a rank vanished.
constexpr auto kHealthInterval = std::chrono::milliseconds(200);
// Empty polls before a waiting worker starts yielding its core (ranks may share cores).
constexpr int kSpinsBeforeYield = 256;

std::string size_text(size_t bytes) {
  char buf[32];
  if (bytes >= (1u << 20)) {
    std::snprintf(buf, sizeof(buf), "%.2f MiB", static_cast<double>(bytes) / (1 << 20));
  } else if (bytes >= 1024) {
    std::snprintf(buf, sizeof(buf), "%.1f KiB", static_cast<double>(bytes) / 1024);
  } else {
    std::snprintf(buf, sizeof(buf), "%zu B", bytes);
  }
  return buf;
}

}  // namespace

ProgressEngine::ProgressEngine(std::unique_ptr<Endpoint> endpoint, std::unique_ptr<Store> store, int world_rank,
                               int world_size, CommOptions options, std::string closing_key)
    : endpoint_(std::move(endpoint)),
      store_(std::move(store)),
      world_rank_(world_rank),
      world_size_(world_size),
      options_(std::move(options)),
      closing_key_(std::move(closing_key)),
      completions_(64) {
  max_sends_in_flight_ = std::clamp<size_t>(endpoint_->traits().tx_size / 2, 8, 256);
  worker_ = std::thread([this] { run(); });
}

ProgressEngine::~ProgressEngine() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  cv_.notify_all();
  worker_.join();
}

void ProgressEngine::submit(const WorkHandle& work, std::function<void()> task) {
  {
    std::lock_guard lock(mutex_);
    queue_.emplace_back(work, std::move(task));
  }
  cv_.notify_all();
}

void ProgressEngine::attempt_then_submit(const WorkHandle& work, const std::function<bool()>& attempt,
                                         std::function<void()> rest) {
  {
    std::lock_guard lock(mutex_);
    if (running_ || !queue_.empty() || stopping_) {
      queue_.emplace_back(work, std::move(rest));
      cv_.notify_all();
      return;
    }
    running_ = true;
  }
  const auto begin = trace::Clock::now();
  const Outcome outcome = execute(work, attempt);
  if (trace::recording()) trace::span(work->description(), "progress", begin, trace::Clock::now());
  bool queued;
  {
    std::lock_guard lock(mutex_);
    if (!outcome.finished) queue_.emplace_front(work, std::move(rest));  // before what was issued after it
    running_ = false;
    queued = !queue_.empty();
  }
  // Wake the worker only for tasks: woken for nothing, it would poll the fabric and be in the way
  // of this thread's next operation.
  if (queued) cv_.notify_all();
  if (!outcome.finished) return;
  {
    // Operations complete in issue order: the worker may still be reporting the one before.
    std::unique_lock lock(mutex_);
    reported_cv_.wait_for(lock, std::chrono::seconds(1), [this] { return !reporting_; });
  }
  report(work, outcome);
}

void ProgressEngine::run() {
  trace::name_this_thread("comm progress");
  for (;;) {
    std::unique_lock lock(mutex_);
    // Idle: wake now and then to drive the fabric (manual-progress providers move nothing,
    // including data a peer is still reading from us, unless someone polls).
    cv_.wait_for(lock, std::chrono::milliseconds(2), [this] { return !running_ && (!queue_.empty() || stopping_); });
    if (running_) continue;  // a caller is attempting an operation, and owns the endpoint meanwhile
    running_ = true;
    if (queue_.empty()) {
      if (stopping_) break;
      lock.unlock();
      if (!broken_) progress();
      lock.lock();
      running_ = false;
      continue;
    }
    auto [work, task] = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    const auto begin = trace::Clock::now();
    const Outcome outcome = execute(work, [&task] {
      task();
      return true;
    });
    if (trace::recording()) trace::span(work->description(), "progress", begin, trace::Clock::now());
    lock.lock();
    running_ = false;
    reporting_ = true;
    lock.unlock();
    // Only now: the caller, woken by the completion, may try its next operation at once, and
    // must find the engine free.
    report(work, outcome);
    lock.lock();
    reporting_ = false;
    lock.unlock();
    reported_cv_.notify_all();
  }
  if (!broken_) shutdown_barrier();
  {
    std::lock_guard lock(mutex_);
    finished_ = true;
  }
  finished_cv_.notify_all();
}

ProgressEngine::Outcome ProgressEngine::execute(const WorkHandle& work, const std::function<bool()>& task) {
  if (broken_) {
    return {true, Error(broken_->kind(), "rank " + std::to_string(world_rank_) + ": " + work->description() +
                                             " not run: the communicator failed earlier: " + broken_->what())};
  }
  try {
    return {task(), std::nullopt};
  } catch (const Error& e) {
    broken_ = e;
  } catch (const std::exception& e) {
    broken_ = Error(ErrorKind::Internal, work->description() + ": " + e.what());
  }
  return {true, broken_};
}

void ProgressEngine::report(const WorkHandle& work, const Outcome& outcome) {
  if (outcome.error) {
    work->fail(*outcome.error);
  } else {
    work->complete();
  }
}

bool ProgressEngine::stop(std::chrono::milliseconds bound) {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  cv_.notify_all();
  std::unique_lock lock(mutex_);
  return finished_cv_.wait_for(lock, bound, [this] { return finished_; });
}

// Keep driving the fabric until every rank has finished its last operation: a send that
// completed here may still sit in a provider buffer that only our polling pushes out.
void ProgressEngine::shutdown_barrier() {
  try {
    const std::string& key = closing_key_;
    store_->add(key, 1);
    auto deadline = Clock::now() + std::chrono::seconds(30);
    while (Clock::now() < deadline) {
      for (int i = 0; i < 50; ++i) {
        progress();
        std::this_thread::sleep_for(std::chrono::microseconds(100));
      }
      auto closed = store_->try_get(key);
      if (closed && std::stoll(*closed) >= world_size_) return;
      if (store_->check(store_protocol::kDeadRanksKey)) return;
    }
  } catch (const std::exception&) {
    // The store is gone (rank 0 finished first): nobody left to wait for.
  }
}

RequestId ProgressEngine::acquire(bool is_send, int peer, size_t bytes, uint32_t index) {
  RequestId id;
  if (!free_.empty()) {
    id = free_.back();
    free_.pop_back();
  } else {
    id = static_cast<RequestId>(slots_.size());
    slots_.emplace_back();
    states_.emplace_back();
  }
  slots_[id] = Slot{};
  slots_[id].id = id;
  states_[id] = RequestState{false, is_send, peer, bytes, index, 0, {}};
  return id;
}

void ProgressEngine::progress() {
  size_t n = endpoint_->poll(completions_);
  for (size_t i = 0; i < n; ++i) {
    auto* slot = static_cast<Slot*>(completions_[i].context);
    if (!slot) continue;
    RequestState& s = states_[slot->id];
    s.done = true;
    s.error = completions_[i].error;
    s.error_text = completions_[i].error_text;
    if (s.is_send) --sends_in_flight_;
  }
}

RequestId ProgressEngine::post_send(int world_peer, const void* data, size_t bytes, uint64_t tag, uint32_t index,
                                    const OpInfo& op) {
  Clock::time_point next_check = Clock::now() + kHealthInterval;
  for (int spins = 0; sends_in_flight_ >= max_sends_in_flight_; ++spins) {
    progress();
    if ((spins & 63) == 0) check_health(op, ~RequestId{0}, next_check);
  }
  RequestId id = acquire(true, world_peer, bytes, index);
  for (int spins = 0; endpoint_->post_send(data, bytes, world_peer, tag, &slots_[id].context) == -FI_EAGAIN; ++spins) {
    progress();
    if ((spins & 63) == 0) check_health(op, id, next_check);
  }
  ++sends_in_flight_;
  return id;
}

RequestId ProgressEngine::post_recv(int world_peer, void* data, size_t bytes, uint64_t tag, uint32_t index,
                                    const OpInfo& op) {
  Clock::time_point next_check = Clock::now() + kHealthInterval;
  RequestId id = acquire(false, world_peer, bytes, index);
  for (int spins = 0; endpoint_->post_recv(data, bytes, world_peer, tag, &slots_[id].context) == -FI_EAGAIN; ++spins) {
    progress();
    if ((spins & 63) == 0) check_health(op, id, next_check);
  }
  return id;
}

void ProgressEngine::wait(RequestId request, const OpInfo& op) {
  Clock::time_point next_check = Clock::now() + kHealthInterval;
  for (int spins = 0; !states_[request].done; ++spins) {
    progress();
    if (states_[request].done) break;
    if ((spins & 63) == 0) check_health(op, request, next_check);
    if (spins > kSpinsBeforeYield) sched_yield();
  }
  if (states_[request].error != 0) {
    // A peer's death often surfaces first as a fabric error; give the store a moment to tell
    // which rank it was, which is what the user needs to know.
    std::string fabric = "the fabric reported: " + states_[request].error_text;
    std::string cause = dead_member_cause(op, std::chrono::seconds(2));
    fail(op, request, cause.empty() ? fabric : cause + "; " + fabric);
  }
  free_.push_back(request);
}

void ProgressEngine::check_health(const OpInfo& op, RequestId waiting_for, Clock::time_point& next_check) {
  check_health(op, request_detail(waiting_for), endpoint_->traits().provider, next_check);
}

void ProgressEngine::check_health(const OpInfo& op, const std::string& detail, const std::string& over,
                                  Clock::time_point& next_check) {
  auto now = Clock::now();
  if (now > op.deadline) {
    fail(op, detail, over, "timed out (DSX_COMM_TIMEOUT=" + std::to_string(options_.timeout.count() / 1000) +
                               " s): the peer died or stopped answering");
  }
  if (now < next_check) return;
  next_check = now + kHealthInterval;
  std::string cause = dead_member_cause(op, Clock::duration::zero());
  if (!cause.empty()) fail(op, detail, over, cause);
}

void ProgressEngine::keep_alive(const OpInfo& op, int world_peer, const std::string& waiting_for, bool exited,
                                Clock::time_point& next_check) {
  const std::string detail = " while waiting for rank " + std::to_string(world_peer) + " (" + waiting_for + ")";
  if (exited) fail(op, detail, "shared memory", "rank(s) " + std::to_string(world_peer) + " died (its process exited)");
  // The first call of an operation starts the clock: the store is asked only after a wait has
  // lasted kHealthInterval (a short wait must not cost a round trip to the store).
  if (next_check == Clock::time_point{}) next_check = Clock::now() + kHealthInterval;
  progress();
  check_health(op, detail, "shared memory", next_check);
}

std::string ProgressEngine::dead_member_cause(const OpInfo& op, Clock::duration patience) {
  auto give_up = Clock::now() + patience;
  for (;;) {
    std::optional<std::string> dead;
    try {
      dead = store_->try_get(store_protocol::kDeadRanksKey);
    } catch (const Error& e) {
      return "rank 0, which serves the rendezvous store, is gone (" + std::string(e.what()) + ")";
    }
    std::string names;
    if (dead) {
      std::stringstream list(*dead);
      for (std::string item; std::getline(list, item, ',');) {
        int r = std::stoi(item);
        if (std::find(op.members->begin(), op.members->end(), r) != op.members->end()) {
          names += (names.empty() ? "" : ", ") + item;
        }
      }
    }
    if (!names.empty()) return "rank(s) " + names + " died (the connection to the rendezvous store closed without a goodbye)";
    if (Clock::now() >= give_up) return "";
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

std::string ProgressEngine::request_detail(RequestId request) const {
  if (request >= states_.size()) return "";
  const RequestState& s = states_[request];
  return std::string(s.is_send ? " while sending " : " while waiting for ") + size_text(s.bytes) +
         (s.is_send ? " to rank " : " from rank ") + std::to_string(s.peer) + " (message " + std::to_string(s.index) + ")";
}

void ProgressEngine::fail(const OpInfo& op, RequestId request, const std::string& why) {
  fail(op, request_detail(request), endpoint_->traits().provider, why);
}

void ProgressEngine::fail(const OpInfo& op, const std::string& detail, const std::string& over, const std::string& why) {
  throw Error(ErrorKind::Comm, "rank " + std::to_string(world_rank_) + ": " + op.description + " failed" + detail +
                                   " over " + over + ": " + why +
                                   " - check that rank's log; every rank of the job must issue the same collectives");
}

void* ProgressEngine::scratch(size_t bytes) {
  if (bytes > scratch_bytes_ || scratch_.empty()) {
    scratch_bytes_ = std::max(bytes, scratch_bytes_ * 2);
    scratch_.push_back(std::make_unique<char[]>(std::max<size_t>(scratch_bytes_, 64)));
  }
  return scratch_.back().get();
}

}  // namespace dsx::comm::ofi
