#include "tokenizer/worker_pool.h"

namespace dsx::tokenizer {

WorkerPool& WorkerPool::shared() {
  static WorkerPool pool;
  return pool;
}

WorkerPool::~WorkerPool() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  job_ready_.notify_all();
  for (auto& t : workers_) t.join();
}

void WorkerPool::run(unsigned threads, const std::function<void()>& work) {
  std::lock_guard one_run(run_mutex_);
  const unsigned helpers = threads > 1 ? threads - 1 : 0;
  {
    std::lock_guard lock(mutex_);
    while (workers_.size() < helpers) workers_.emplace_back([this] { loop(); });
    job_ = &work;
    wanted_ = helpers;
    taken_ = 0;
    finished_ = 0;
    ++generation_;
  }
  job_ready_.notify_all();
  work();
  std::unique_lock lock(mutex_);
  job_done_.wait(lock, [&] { return finished_ == wanted_; });
  job_ = nullptr;
}

void WorkerPool::loop() {
  uint64_t seen = 0;
  std::unique_lock lock(mutex_);
  for (;;) {
    job_ready_.wait(lock, [&] { return stopping_ || (generation_ != seen && taken_ < wanted_); });
    if (stopping_) return;
    seen = generation_;
    ++taken_;
    const std::function<void()>* job = job_;
    lock.unlock();
    (*job)();
    lock.lock();
    if (++finished_ == wanted_) job_done_.notify_one();
  }
}

}  // namespace dsx::tokenizer
