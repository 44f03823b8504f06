#include "tests/emulated_gpu/streams.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "tests/emulated_gpu/emulated_gpu.h"
#include "tests/emulated_gpu/memory.h"
#include "tests/emulated_gpu/order_check.h"
#include "tests/emulated_gpu/runtime.h"

namespace dsx::emu {

namespace {
// A wait inside a stream (for another stream's point) longer than this is a deadlock: the GPU
// would hang, the emulator says so (DSX_EMULATED_WAIT_SECONDS).
std::chrono::seconds stream_wait_limit() {
  const char* s = std::getenv("DSX_EMULATED_WAIT_SECONDS");
  return std::chrono::seconds(s && std::atoi(s) > 0 ? std::atoi(s) : 300);
}
}  // namespace

struct StreamImpl {
  int device = 0;
  int actor = 0;  // in the stream-order check
  bool legacy = false, blocking = true;
  std::string name;
  std::mutex mutex;
  std::condition_variable changed;
  struct Item {
    const char* what;
    std::function<std::string()> work;
    bool touches_memory;
  };
  std::deque<Item> queue;
  uint64_t enqueued = 0, completed = 0;
  bool destroyed = false;
  uint64_t polled_mark = UINT64_MAX;  // the last point a query counted as a host sync

  // Appends and returns the item's point (completed >= point once it ran).
  uint64_t push(Item item) {
    std::lock_guard lock(mutex);
    queue.push_back(std::move(item));
    changed.notify_all();
    return ++enqueued;
  }
  // Blocks the caller until the stream passed `point`; false on the deadlock limit.
  bool wait_for(uint64_t point, std::chrono::seconds limit) {
    std::unique_lock lock(mutex);
    return changed.wait_for(lock, limit, [&] { return completed >= point; });
  }
  bool reached(uint64_t point) {
    std::lock_guard lock(mutex);
    return completed >= point;
  }
};

namespace {

// What the last cudaEventRecord left in an event.
struct EventRecord {
  std::shared_ptr<StreamImpl> stream;  // null: never recorded
  uint64_t point = 0;
  OrderClock clock;  // the recording stream's, at the record
  uint64_t generation = 0;
  std::shared_ptr<std::atomic<int64_t>> stamp;  // ns, when the stream reached it
};

struct EventImpl {
  int device = 0;
  unsigned flags = 0;
  // A record on one thread may meet a query or wait on another, as CUDA allows: the record is
  // replaced and read whole, under the lock.
  std::mutex mutex;
  EventRecord last;
  uint64_t polled_generation = UINT64_MAX;

  EventRecord snapshot() {
    std::lock_guard lock(mutex);
    return last;
  }
};

struct Registry {
  std::mutex mutex;
  std::map<StreamImpl*, std::shared_ptr<StreamImpl>> streams;
  std::map<int, std::shared_ptr<StreamImpl>> legacy;  // per device
  std::set<EventImpl*> events;
  std::map<int, cudaError_t> sticky;  // per device
  std::map<int, std::string> fault;
};

Registry& registry() {
  static Registry* r = new Registry;  // never destroyed: workers outlive static destructors
  return *r;
}

std::atomic<uint64_t> g_host_syncs{0};
thread_local uint64_t t_host_syncs = 0;  // this thread's share (a watchdog polls on its own)

// Set by the first fault on any device: until then every call and stream item skips the
// registry lock that the sticky errors need.
std::atomic<bool> g_any_fault{false};

void fault(int device, const std::string& message) {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  g_any_fault.store(true);
  if (r.sticky[device] == cudaSuccess) {
    r.sticky[device] = cudaErrorLaunchFailure;
    r.fault[device] = message;
  }
  say("GPU " + std::to_string(device) + " fault: " + message);
}

void run_worker(std::shared_ptr<StreamImpl> s) {
  for (;;) {
    StreamImpl::Item item;
    {
      std::unique_lock lock(s->mutex);
      s->changed.wait(lock, [&] { return !s->queue.empty() || s->destroyed; });
      if (s->queue.empty()) return;
      item = std::move(s->queue.front());
      s->queue.pop_front();
    }
    bool dead = false;
    if (g_any_fault.load()) {
      Registry& r = registry();
      std::lock_guard lock(r.mutex);
      dead = r.sticky[s->device] != cudaSuccess;
    }
    if (!dead) {  // after a fault the context is gone: later work does not run, as on a GPU
      std::string failure;
      try {
        failure = item.touches_memory ? with_device_access(item.work) : item.work();
      } catch (const std::exception& e) {
        failure = std::string("threw: ") + e.what();
      }
      if (!failure.empty()) fault(s->device, std::string(item.what) + ": " + failure);
    }
    std::lock_guard lock(s->mutex);
    ++s->completed;
    s->changed.notify_all();
  }
}

std::shared_ptr<StreamImpl> start_stream(int device, bool legacy, bool blocking) {
  static std::atomic<int> created{0};
  auto s = std::make_shared<StreamImpl>();
  s->device = device;
  s->legacy = legacy;
  s->blocking = blocking;
  s->actor = add_order_actor(legacy ? "GPU " + std::to_string(device) + "'s legacy stream"
                                    : "GPU " + std::to_string(device) + " stream #" +
                                          std::to_string(created.fetch_add(1)));
  std::thread(run_worker, s).detach();
  return s;
}

// The stream a handle names: 0, cudaStreamLegacy and cudaStreamPerThread are the current
// device's legacy stream. Null for a handle that is not a live stream.
std::shared_ptr<StreamImpl> resolve(cudaStream_t handle) {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  if (handle == nullptr || handle == cudaStreamLegacy || handle == cudaStreamPerThread) {
    const int d = current_device();
    auto& legacy = r.legacy[d];
    if (!legacy) legacy = start_stream(d, true, true);
    return legacy;
  }
  auto it = r.streams.find(reinterpret_cast<StreamImpl*>(handle));
  return it == r.streams.end() ? nullptr : it->second;
}

// Work that makes `s` wait for `other` to pass `point` first.
StreamImpl::Item wait_item(std::shared_ptr<StreamImpl> other, uint64_t point) {
  return {"a wait for another stream's work",
          [other, point]() -> std::string {
            if (other->wait_for(point, stream_wait_limit())) return {};
            return "waited " + std::to_string(stream_wait_limit().count()) +
                   " s for another stream that never got there: work ordered in a cycle";
          },
          false};
}

// The legacy stream's implicit ordering: work on it waits for the device's blocking streams,
// and work on a blocking stream waits for it.
void order_with_legacy(StreamImpl& s) {
  Registry& r = registry();
  std::vector<std::pair<std::shared_ptr<StreamImpl>, uint64_t>> before;
  {
    std::lock_guard lock(r.mutex);
    if (s.legacy) {
      for (auto& [ptr, other] : r.streams)
        if (other->device == s.device && other->blocking) before.emplace_back(other, 0);
    } else if (s.blocking) {
      auto it = r.legacy.find(s.device);
      if (it != r.legacy.end()) before.emplace_back(it->second, 0);
    }
  }
  for (auto& [other, point] : before) {
    order_merge(s.actor, order_snapshot(other->actor));
    {
      std::lock_guard lock(other->mutex);
      if (other->completed >= other->enqueued) continue;
      point = other->enqueued;
    }
    s.push(wait_item(other, point));
  }
}

}  // namespace

cudaError_t sticky_error() {
  if (!g_any_fault.load()) return cudaSuccess;
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  auto it = r.sticky.find(current_device());
  return it == r.sticky.end() ? cudaSuccess : it->second;
}

uint64_t host_syncs() { return g_host_syncs.load(); }
uint64_t host_syncs_of_this_thread() { return t_host_syncs; }
void count_host_sync() {
  g_host_syncs.fetch_add(1);
  ++t_host_syncs;
}

cudaError_t enqueue(cudaStream_t stream, const char* what, std::function<std::string()> work,
                    const std::vector<Touch>& touches) {
  if (cudaError_t e = sticky_error()) return e;
  auto s = resolve(stream);
  if (!s) return cudaErrorInvalidResourceHandle;
  order_with_legacy(*s);
  if (std::string race = order_access(s->actor, touches, what); !race.empty()) {
    fault(s->device, race);
    return cudaErrorLaunchFailure;
  }
  s->push({what, std::move(work), true});
  return cudaSuccess;
}

int stream_device(cudaStream_t stream) {
  auto s = resolve(stream);
  return s ? s->device : -1;
}

cudaError_t synchronize_stream(cudaStream_t stream) {
  auto s = resolve(stream);
  if (!s) return cudaErrorInvalidResourceHandle;
  count_host_sync();
  uint64_t point;
  {
    std::lock_guard lock(s->mutex);
    point = s->enqueued;
  }
  const OrderClock reached = order_snapshot(s->actor);
  if (!s->wait_for(point, stream_wait_limit())) {
    say("cudaStreamSynchronize waited " + std::to_string(stream_wait_limit().count()) +
        " s for work that never finished");
    return cudaErrorLaunchTimeout;
  }
  order_merge(kHostActor, reached);
  protect_if_idle();
  return sticky_error();
}

cudaError_t create_stream(cudaStream_t* out, unsigned flags) {
  if (!out) return cudaErrorInvalidValue;
  if (cudaError_t e = sticky_error()) return e;
  auto s = start_stream(current_device(), false, !(flags & cudaStreamNonBlocking));
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  r.streams[s.get()] = s;
  *out = reinterpret_cast<cudaStream_t>(s.get());
  return cudaSuccess;
}

cudaError_t destroy_stream(cudaStream_t stream) {
  Registry& r = registry();
  std::shared_ptr<StreamImpl> s;
  {
    std::lock_guard lock(r.mutex);
    auto it = r.streams.find(reinterpret_cast<StreamImpl*>(stream));
    if (it == r.streams.end()) return cudaErrorInvalidResourceHandle;
    s = it->second;
    r.streams.erase(it);
  }
  // As CUDA: returns at once; the worker finishes the queue, then ends.
  std::lock_guard lock(s->mutex);
  s->destroyed = true;
  s->changed.notify_all();
  return cudaSuccess;
}

cudaError_t query_stream(cudaStream_t stream) {
  auto s = resolve(stream);
  if (!s) return cudaErrorInvalidResourceHandle;
  std::lock_guard lock(s->mutex);
  if (s->polled_mark != s->enqueued) {
    s->polled_mark = s->enqueued;
    count_host_sync();
  }
  if (s->completed < s->enqueued) return cudaErrorNotReady;
  order_merge(kHostActor, order_snapshot(s->actor));
  protect_if_idle();
  return sticky_error();
}

cudaError_t synchronize_device() {
  Registry& r = registry();
  std::vector<std::shared_ptr<StreamImpl>> all;
  {
    std::lock_guard lock(r.mutex);
    for (auto& [ptr, s] : r.streams)
      if (s->device == current_device()) all.push_back(s);
    auto it = r.legacy.find(current_device());
    if (it != r.legacy.end()) all.push_back(it->second);
  }
  count_host_sync();
  for (auto& s : all) {
    uint64_t point;
    {
      std::lock_guard lock(s->mutex);
      point = s->enqueued;
    }
    const OrderClock reached = order_snapshot(s->actor);
    if (!s->wait_for(point, stream_wait_limit())) return cudaErrorLaunchTimeout;
    order_merge(kHostActor, reached);
  }
  protect_if_idle();
  return sticky_error();
}

cudaError_t create_event(cudaEvent_t* out, unsigned flags) {
  if (!out) return cudaErrorInvalidValue;
  auto* e = new EventImpl;
  e->device = current_device();
  e->flags = flags;
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  r.events.insert(e);
  *out = reinterpret_cast<cudaEvent_t>(e);
  return cudaSuccess;
}

namespace {
EventImpl* find_event(cudaEvent_t event) {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  auto it = r.events.find(reinterpret_cast<EventImpl*>(event));
  return it == r.events.end() ? nullptr : *it;
}
}  // namespace

cudaError_t destroy_event(cudaEvent_t event) {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  auto it = r.events.find(reinterpret_cast<EventImpl*>(event));
  if (it == r.events.end()) return cudaErrorInvalidResourceHandle;
  delete *it;
  r.events.erase(it);
  return cudaSuccess;
}

cudaError_t record_event(cudaEvent_t event, cudaStream_t stream) {
  if (cudaError_t e = sticky_error()) return e;
  EventImpl* e = find_event(event);
  auto s = resolve(stream);
  if (!e || !s) return cudaErrorInvalidResourceHandle;
  if (s->device != e->device) return cudaErrorInvalidResourceHandle;  // CUDA's rule too
  auto stamp = std::make_shared<std::atomic<int64_t>>(0);
  order_with_legacy(*s);
  const uint64_t point = s->push({"an event record",
                                  [stamp]() -> std::string {
                                    stamp->store(std::chrono::steady_clock::now()
                                                     .time_since_epoch()
                                                     .count());
                                    return {};
                                  },
                                  false});
  OrderClock clock = order_snapshot(s->actor);
  std::lock_guard lock(e->mutex);
  e->last = {s, point, std::move(clock), e->last.generation + 1, stamp};
  return cudaSuccess;
}

cudaError_t query_event(cudaEvent_t event) {
  EventImpl* e = find_event(event);
  if (!e) return cudaErrorInvalidResourceHandle;
  const EventRecord rec = e->snapshot();
  if (!rec.stream) return cudaSuccess;
  {
    std::lock_guard lock(e->mutex);
    if (e->polled_generation != rec.generation) {  // a polling loop is one wait
      e->polled_generation = rec.generation;
      count_host_sync();
    }
  }
  if (!rec.stream->reached(rec.point)) return cudaErrorNotReady;
  order_merge(kHostActor, rec.clock);
  protect_if_idle();
  return sticky_error();
}

cudaError_t synchronize_event(cudaEvent_t event) {
  EventImpl* e = find_event(event);
  if (!e) return cudaErrorInvalidResourceHandle;
  count_host_sync();
  const EventRecord rec = e->snapshot();
  if (!rec.stream) return cudaSuccess;
  if (!rec.stream->wait_for(rec.point, stream_wait_limit())) return cudaErrorLaunchTimeout;
  order_merge(kHostActor, rec.clock);
  protect_if_idle();
  return sticky_error();
}

cudaError_t stream_wait_event(cudaStream_t stream, cudaEvent_t event) {
  if (cudaError_t e = sticky_error()) return e;
  EventImpl* e = find_event(event);
  auto s = resolve(stream);
  if (!e || !s) return cudaErrorInvalidResourceHandle;
  const EventRecord rec = e->snapshot();
  if (!rec.stream) return cudaSuccess;  // never recorded: nothing to wait for
  order_with_legacy(*s);
  order_merge(s->actor, rec.clock);
  s->push(wait_item(rec.stream, rec.point));
  return cudaSuccess;
}

cudaError_t event_elapsed(float* ms, cudaEvent_t start, cudaEvent_t end) {
  EventImpl* a = find_event(start);
  EventImpl* b = find_event(end);
  if (!ms || !a || !b) return cudaErrorInvalidResourceHandle;
  if ((a->flags | b->flags) & cudaEventDisableTiming) return cudaErrorInvalidResourceHandle;
  const EventRecord ra = a->snapshot(), rb = b->snapshot();
  if (!ra.stream || !rb.stream) return cudaErrorInvalidResourceHandle;
  if (!ra.stream->reached(ra.point) || !rb.stream->reached(rb.point)) return cudaErrorNotReady;
  *ms = float(double(rb.stamp->load() - ra.stamp->load()) / 1e6);
  return cudaSuccess;
}

std::string fault_message(int device) {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  auto it = r.fault.find(device);
  return it == r.fault.end() ? std::string() : it->second;
}

// For enqueue's callers that must report a fault found outside a stream (a bad launch).
void device_fault(int device, const std::string& message) { fault(device, message); }

}  // namespace dsx::emu
