// The threads that parallel encoding runs on, started once and kept: each keeps its word cache
// and regex scratch (thread_local) from one call to the next, which threads started per call
// would lose. One run at a time; the calling thread works too.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace dsx::tokenizer {

class WorkerPool {
 public:
  static WorkerPool& shared();
  ~WorkerPool();

  // Runs `work` on `threads` threads at once (the caller's among them) and returns when every
  // one has returned. `work` must not throw.
  void run(unsigned threads, const std::function<void()>& work);

 private:
  void loop();

  std::mutex run_mutex_;  // one run at a time
  std::mutex mutex_;
  std::condition_variable job_ready_;
  std::condition_variable job_done_;
  std::vector<std::thread> workers_;
  const std::function<void()>* job_ = nullptr;
  uint64_t generation_ = 0;  // one per run; a worker takes at most one share of each
  unsigned wanted_ = 0;      // helpers this run needs
  unsigned taken_ = 0;
  unsigned finished_ = 0;
  bool stopping_ = false;
};

}  // namespace dsx::tokenizer
