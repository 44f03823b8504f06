// The heart of the ofi backend: one worker thread that owns the libfabric endpoint, runs the
// operations of every group in the order they were issued, and drives the fabric while they wait.
// Requests are posted and waited on here; every wait has the operation's deadline and, while it
// waits, watches the store for ranks that vanished, so a dead peer becomes an error naming it
// instead of a hang. After one operation fails the engine is broken: the endpoint's state is
// unknown, so every later operation fails at once with the first error.
#pragma once

#include <chrono>

#include <rdma/fabric.h>

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "comm/algorithms/transport.h"
#include "comm/communicator.h"
#include "comm/ofi/endpoint.h"
#include "comm/store/store.h"

namespace dsx::comm::ofi {

using algorithms::RequestId;

// What an operation tells the engine about itself, for deadlines and error messages.
struct OpInfo {
  std::string description;            // "allreduce #12 (fp32, 1048576 elements, group of 4)"
  Clock::time_point deadline;
  const std::vector<int>* members;    // group rank -> world rank
};

class ProgressEngine {
 public:
  // `closing_key`: the store counter every rank bumps when its engine shuts down.
  ProgressEngine(std::unique_ptr<Endpoint> endpoint, std::unique_ptr<Store> store, int world_rank, int world_size,
                 CommOptions options, std::string closing_key);
  ~ProgressEngine();
  // Asks the worker to finish and waits up to `bound` for it. False when it did not: it is stuck
  // inside the provider (libfabric's shm can spin forever on a region a killed peer left locked),
  // and the owner must abandon this engine rather than destroy it (see OfiCommunicator::Shared).
  bool stop(std::chrono::milliseconds bound);

  // Runs `task` on the worker after every task submitted before it, then completes `work`, or
  // fails it with the task's error.
  void submit(const WorkHandle& work, std::function<void()> task);
  // For operations that may finish on the caller's thread (a hand-over to the worker and back
  // costs two thread wake-ups, tens of microseconds on a VM: more than a small allreduce). When
  // nothing is queued or running, runs `attempt` here, at once; it must not wait for peers. If it
  // returns true, `work` is complete; otherwise `rest` is queued ahead of anything submitted
  // meanwhile and finishes it on the worker. When the engine is busy, `rest` is just submitted
  // (so it must also do the whole operation when `attempt` never ran).
  void attempt_then_submit(const WorkHandle& work, const std::function<bool()>& attempt, std::function<void()> rest);

  // ---- whoever runs a task: the worker, or a caller in attempt_then_submit ----
  RequestId post_send(int world_peer, const void* data, size_t bytes, uint64_t tag, uint32_t index, const OpInfo& op);
  RequestId post_recv(int world_peer, void* data, size_t bytes, uint64_t tag, uint32_t index, const OpInfo& op);
  void wait(RequestId request, const OpInfo& op);
  void* scratch(size_t bytes);
  // For waits outside the fabric (the shared-memory path), called now and then while waiting:
  // drives the fabric, enforces the operation's deadline, and fails naming `world_peer` (what
  // `waiting_for` describes) when it died - at once if the caller saw its process `exited` -
  // or the deadline passed.
  void keep_alive(const OpInfo& op, int world_peer, const std::string& waiting_for, bool exited,
                  Clock::time_point& next_check);

  const CommOptions& options() const { return options_; }
  const Endpoint& endpoint() const { return *endpoint_; }
  int world_rank() const { return world_rank_; }

 private:
  // fi_context2 first: libfabric hands back its address and we find the request from it.
  struct Slot {
    fi_context2 context;
    RequestId id;
  };
  struct RequestState {
    bool done = false;
    bool is_send = false;
    int peer = -1;  // world rank
    size_t bytes = 0;
    uint32_t index = 0;
    int error = 0;
    std::string error_text;
  };

  void run();
  // What running a task came to: not finished (an attempt that left the rest to the worker),
  // done, or failed with `error`.
  struct Outcome {
    bool finished;
    std::optional<Error> error;
  };
  // Runs `task` with the broken-engine rules (a failure breaks the engine). The caller has set
  // running_; it reports the outcome to the work after clearing it.
  Outcome execute(const WorkHandle& work, const std::function<bool()>& task);
  static void report(const WorkHandle& work, const Outcome& outcome);
  void shutdown_barrier();
  RequestId acquire(bool is_send, int peer, size_t bytes, uint32_t index);
  void progress();
  void check_health(const OpInfo& op, RequestId waiting_for, Clock::time_point& next_check);
  void check_health(const OpInfo& op, const std::string& detail, const std::string& over, Clock::time_point& next_check);
  std::string request_detail(RequestId request) const;
  // Why the operation cannot finish if a member rank died or the store is gone ("" if neither),
  // waiting up to `patience` for the store to learn of a death.
  std::string dead_member_cause(const OpInfo& op, Clock::duration patience);
  [[noreturn]] void fail(const OpInfo& op, RequestId request, const std::string& why);
  [[noreturn]] void fail(const OpInfo& op, const std::string& detail, const std::string& over, const std::string& why);

  std::unique_ptr<Endpoint> endpoint_;
  std::unique_ptr<Store> store_;  // this engine's own connection: dead-rank checks, shutdown
  int world_rank_, world_size_;
  CommOptions options_;
  std::string closing_key_;

  std::deque<Slot> slots_;
  std::vector<RequestState> states_;
  std::vector<RequestId> free_;
  std::vector<Completion> completions_;
  size_t sends_in_flight_ = 0;
  size_t max_sends_in_flight_;
  std::vector<std::unique_ptr<char[]>> scratch_;  // never freed early: registrations point at it
  size_t scratch_bytes_ = 0;

  std::mutex mutex_;
  std::condition_variable cv_;
  std::condition_variable finished_cv_;
  bool finished_ = false;  // the worker has left run()
  std::deque<std::pair<WorkHandle, std::function<void()>>> queue_;
  bool stopping_ = false;
  // A task, an attempt or the idle poll is running, on the worker or on a caller's thread:
  // whoever set it owns the endpoint and everything below "whoever runs a task" until it clears it.
  bool running_ = false;
  // The worker has finished a task but not yet completed its work: an attempt that finishes the
  // next operation meanwhile waits for it (reported_cv_), so completions keep the issue order.
  bool reporting_ = false;
  std::condition_variable reported_cv_;
  std::optional<Error> broken_;
  std::thread worker_;
};

}  // namespace dsx::comm::ofi
