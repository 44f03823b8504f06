// The stream-order checker of the cpu device: the idea of PyTorch's CUDA sanitizer, run where
// the work really happens on other threads. Every actor (each stream, and the host) has a vector
// clock; enqueueing work ticks its actor; recording an event copies the stream's clock into the
// event, waiting for it merges the event's clock into the waiter's, and the host's synchronize
// merges a stream's clock into the host's. Every byte range remembers its last write and the
// reads since. An access is ordered after an earlier one of another actor when the accessor's
// clock has reached that access's tick; a read must be ordered after the last write, a write
// after the last write and every read since. Otherwise the checker throws Error(Internal) naming
// both accesses, their streams and the call stacks that enqueued them. The host enqueues all
// work, so work enqueued after the host waited for something (a synchronize, or its own
// accesses) is ordered after it: every stream takes in the host's clock when work is enqueued.
// The compute stream of the cpu device runs on the host's thread but is an actor of its own, so
// that what the model does there needs an event before other streams may use it, as on a GPU.
//
// The checker sees the order the host *asked* for (at enqueue time, as CUDA defines it), so it
// catches a missing wait even when the timing of this run happened to hide it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "device/device.h"

namespace dsx::device {

class StreamChecker {
 public:
  using Clock = std::vector<uint64_t>;  // indexed by actor
  static constexpr int kHost = 0;

  // A new actor (a stream); returns its id.
  int add_actor(const std::string& name);
  // `actor` enqueues (or, for the host, does) an operation touching these ranges. Throws on an
  // unordered access; records the access otherwise.
  void access(int actor, std::span<const Touch> touches, const char* what);
  // Event plumbing: a snapshot of the actor's clock; merging a snapshot into an actor.
  Clock snapshot(int actor);
  void merge(int actor, const Clock& clock);
  // A range starts fresh (allocation) or stops being tracked (free).
  void forget(const void* data, size_t bytes);

 private:
  struct Site {
    int actor = -1;
    uint64_t tick = 0;
    const char* what = "";
    std::vector<void*> stack;
  };
  struct RangeState {
    uintptr_t end = 0;
    bool written = false;
    Site write;
    std::vector<Site> reads;  // at most one per actor: its latest
  };

  void absorb_host(int actor);
  Site site_here(int actor, const char* what) const;
  bool ordered(int actor, const Site& earlier) const;
  void split_at(uintptr_t at);
  [[noreturn]] void report(const Site& now, Access now_access, const Site& earlier,
                           Access earlier_access, uintptr_t begin, uintptr_t end) const;
  std::string describe(const Site& site) const;

  std::mutex mutex_;
  std::vector<std::string> names_{"host"};
  std::vector<Clock> clocks_{Clock(1, 0)};
  std::map<uintptr_t, RangeState> ranges_;  // by begin; disjoint
};

}  // namespace dsx::device
