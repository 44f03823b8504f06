#include "tests/emulated_gpu/block_runner.h"
#include "tests/emulated_gpu/device_functions.h"

#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <boost/context/fiber.hpp>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <numeric>
#include <random>
#include <string>

namespace dsx::emu {
namespace ctx = boost::context;
namespace {

constexpr size_t kStackBytes = 256 * 1024;  // per GPU thread; kernels' frames are small
constexpr size_t kGuardBytes = 4096;        // an overflow faults instead of corrupting a neighbour
constexpr size_t kStaticSharedLimit = 48 * 1024;

// Stacks with a guard page, kept by the worker thread for the next block.
class StackPool {
 public:
  ctx::stack_context allocate() {
    void* base;
    if (!free_.empty()) {
      base = free_.back();
      free_.pop_back();
    } else {
      base = mmap(nullptr, kStackBytes + kGuardBytes, PROT_READ | PROT_WRITE,
                  MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
      if (base == MAP_FAILED) throw std::bad_alloc();
      mprotect(base, kGuardBytes, PROT_NONE);
    }
    ctx::stack_context sc;
    sc.size = kStackBytes;
    sc.sp = static_cast<char*>(base) + kGuardBytes + kStackBytes;
    return sc;
  }
  void deallocate(ctx::stack_context& sc) {
    free_.push_back(static_cast<char*>(sc.sp) - kStackBytes - kGuardBytes);
  }

 private:
  std::vector<void*> free_;
};

thread_local StackPool t_stacks;

struct PooledStack {
  ctx::stack_context allocate() { return t_stacks.allocate(); }
  void deallocate(ctx::stack_context& sc) noexcept { t_stacks.deallocate(sc); }
};

thread_local ThreadState* t_current = nullptr;
thread_local ctx::fiber* t_to_scheduler = nullptr;  // the running fiber's way back

// Suspends the running GPU thread until the scheduler resumes it.
void suspend() {
  ctx::fiber* back = t_to_scheduler;
  *back = std::move(*back).resume();
}

std::string thread_name(const ThreadState& t) {
  return "(" + std::to_string(t.thread_idx.x) + "," + std::to_string(t.thread_idx.y) + "," +
         std::to_string(t.thread_idx.z) + ")";
}

std::string block_name(const BlockState& b) {
  return "block (" + std::to_string(b.block_idx.x) + "," + std::to_string(b.block_idx.y) + "," +
         std::to_string(b.block_idx.z) + ")";
}

void fail(BlockState& b, const std::string& what) {
  if (b.failure.empty()) b.failure = "kernel " + std::string(b.kernel) + ", " + block_name(b) + ": " + what;
}

uint64_t random_seed() {
  const char* s = std::getenv("DSX_EMULATED_SCHEDULE");
  if (!s || std::string(s).rfind("random", 0) != 0) return 0;
  const char* colon = std::strchr(s, ':');
  return colon ? std::strtoull(colon + 1, nullptr, 10) | 1 : 1;
}

// Completes the exchange of the lanes of warp `w` that wait in one, when all of its lanes have
// arrived. Returns whether it completed.
bool complete_warp(BlockState& b, unsigned w) {
  auto& threads = b.threads;
  const unsigned first = w * 32, end = std::min<unsigned>(first + 32, unsigned(threads.size()));
  int leader = -1;
  for (unsigned i = first; i < end; ++i)
    if (threads[i].wait == ThreadWait::Warp) {
      leader = int(i);
      break;
    }
  if (leader < 0) return false;
  const ThreadState& lead = threads[size_t(leader)];
  const unsigned mask = lead.warp_mask;
  for (unsigned lane = 0; lane < 32; ++lane) {
    if (!(mask >> lane & 1u)) continue;
    const unsigned i = first + lane;
    if (i >= end || threads[i].wait == ThreadWait::Exited) continue;  // an exited lane: not awaited
    if (threads[i].wait != ThreadWait::Warp) return false;           // not there yet
    if (threads[i].warp_mask != mask || threads[i].warp_op != lead.warp_op) {
      fail(b, "lanes of warp " + std::to_string(w) + " meet in different warp operations: thread " +
                  thread_name(lead) + " in " + lead.site + " (mask " + std::to_string(mask) +
                  "), thread " + thread_name(threads[i]) + " in " + threads[i].site + " (mask " +
                  std::to_string(threads[i].warp_mask) + ")");
      return false;
    }
  }
  for (unsigned i = first; i < end; ++i)
    if (threads[i].wait == ThreadWait::Warp && !(mask >> (i - first) & 1u)) {
      fail(b, "thread " + thread_name(threads[i]) + " calls " + threads[i].site +
                  " with a mask that leaves out its own lane");
      return false;
    }
  uint64_t ballot = 0;
  for (unsigned i = first; i < end; ++i)
    if (threads[i].wait == ThreadWait::Warp && threads[i].deposit) ballot |= 1ull << (i - first);
  for (unsigned i = first; i < end; ++i) {
    ThreadState& t = threads[i];
    if (t.wait != ThreadWait::Warp) continue;
    if (t.warp_op == WarpOp::Shuffle) {
      const unsigned src = first + t.source_lane;
      if (src >= end || threads[src].wait != ThreadWait::Warp || !(mask >> t.source_lane & 1u)) {
        fail(b, "thread " + thread_name(t) + " reads lane " + std::to_string(t.source_lane) +
                    " in " + t.site + ", which has exited or is not in the mask");
        return false;
      }
      t.result = threads[src].deposit;
    } else {
      t.result = ballot;
    }
  }
  for (unsigned i = first; i < end; ++i)
    if (threads[i].wait == ThreadWait::Warp) threads[i].wait = ThreadWait::Running;
  ++b.warp_epoch[w];
  return true;
}

std::string describe_waits(const BlockState& b) {
  std::string out;
  int shown = 0;
  for (const ThreadState& t : b.threads) {
    if (t.wait == ThreadWait::Exited || t.wait == ThreadWait::Running) continue;
    if (shown++ == 4) {
      out += ", ...";
      break;
    }
    out += (out.empty() ? "" : ", ") + std::string("thread ") + thread_name(t) + " waits in " +
           t.site;
  }
  const auto exited = std::count_if(b.threads.begin(), b.threads.end(),
                                    [](const ThreadState& t) { return t.wait == ThreadWait::Exited; });
  return out + "; " + std::to_string(exited) + " of " + std::to_string(b.threads.size()) +
         " threads have exited";
}

void run_block(BlockState& b, const std::function<void()>& body, std::mt19937_64* shuffle) {
  const size_t n = b.threads.size();
  std::vector<ctx::fiber> fibers(n), back(n);
  for (size_t i = 0; i < n; ++i) {
    fibers[i] = ctx::fiber(std::allocator_arg, PooledStack{}, [&, i](ctx::fiber&& scheduler) {
      back[i] = std::move(scheduler);
      try {
        body();
      } catch (const std::exception& e) {
        fail(b, "thread " + thread_name(b.threads[i]) + " threw: " + e.what());
      }
      b.threads[i].wait = ThreadWait::Exited;
      return std::move(back[i]);
    });
  }
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  const unsigned warps = unsigned((n + 31) / 32);
  while (b.failure.empty()) {
    if (shuffle) std::shuffle(order.begin(), order.end(), *shuffle);
    for (size_t i : order) {
      if (b.threads[i].wait != ThreadWait::Running) continue;
      t_current = &b.threads[i];
      t_to_scheduler = &back[i];
      fibers[i] = std::move(fibers[i]).resume();
    }
    t_current = nullptr;
    if (!b.failure.empty()) break;
    bool released = false;
    for (unsigned w = 0; w < warps; ++w) released |= complete_warp(b, w);
    if (released || !b.failure.empty()) continue;
    size_t live = 0, at_barrier = 0;
    for (const ThreadState& t : b.threads) {
      live += t.wait != ThreadWait::Exited;
      at_barrier += t.wait == ThreadWait::Barrier;
    }
    if (live == 0) break;
    if (at_barrier == live && live < n) {
      // Volta and later release it once every thread still running arrives, but CUDA leaves a
      // __syncthreads that not every thread of the block reaches undefined: say so.
      fail(b, "threads exited without reaching the __syncthreads that others wait in: " +
                  describe_waits(b));
      break;
    }
    if (at_barrier == live) {
      for (ThreadState& t : b.threads)
        if (t.wait == ThreadWait::Barrier) t.wait = ThreadWait::Running;
      ++b.barrier_epoch;
      continue;
    }
    fail(b, "threads wait for each other for ever: " + describe_waits(b) +
                " (a __syncthreads or warp operation that not every thread reaches)");
  }
  // Fibers still suspended (after a failure) unwind their stacks as they are destroyed.
}

}  // namespace

ThreadState& this_thread() {
  if (!t_current) std::abort();  // a device function called outside a kernel
  return *t_current;
}

bool random_schedule() { return random_seed() != 0; }

unsigned shuffle_source(ShuffleKind kind, unsigned lane, int arg, int width) {
  const unsigned w = width >= 1 && width <= 32 && (width & (width - 1)) == 0 ? unsigned(width) : 32u;
  const unsigned base = lane & ~(w - 1), rel = lane & (w - 1);
  switch (kind) {
    case ShuffleKind::Index: return base + (unsigned(arg) & (w - 1));
    case ShuffleKind::Up: return int(rel) - arg < 0 ? lane : lane - unsigned(arg);
    case ShuffleKind::Down: return rel + unsigned(arg) >= w ? lane : lane + unsigned(arg);
    case ShuffleKind::Xor: {
      const unsigned src = lane ^ unsigned(arg);
      return src >= 32 || (src & ~(w - 1)) > base ? lane : src;
    }
  }
  return lane;
}

void sync_threads() {
  ThreadState& t = this_thread();
  t.wait = ThreadWait::Barrier;
  t.site = "__syncthreads";
  suspend();
}

uint64_t warp_exchange(WarpOp op, unsigned mask, uint64_t deposit, unsigned source_lane,
                       const char* site) {
  ThreadState& t = this_thread();
  t.wait = ThreadWait::Warp;
  t.warp_op = op;
  t.warp_mask = mask;
  t.deposit = deposit;
  t.source_lane = source_lane;
  t.site = site;
  suspend();
  return t.result;
}

void reset_shared(BlockState& b, size_t offset, size_t bytes) {
  std::fill_n(b.shared.begin() + std::ptrdiff_t(offset), bytes, std::byte{0xff});
  std::fill_n(b.shared_words.begin() + std::ptrdiff_t(offset / 4), (bytes + 3) / 4,
              SharedWordAccess{});
}

std::string run_grid(const char* kernel, dim3 grid, dim3 block, size_t dynamic_shared,
                     const std::function<void()>& body) {
  static std::atomic<uint64_t> launches{0};
  const uint64_t seed = random_seed();
  std::mt19937_64 shuffle(seed ^ launches.fetch_add(1));
  BlockState b;
  b.kernel = kernel;
  b.block_dim = block;
  b.grid_dim = grid;
  const size_t n = size_t(block.x) * block.y * block.z;
  b.threads.resize(n);
  b.dynamic_shared = (dynamic_shared + 15) / 16 * 16;
  b.shared.resize(b.dynamic_shared + kStaticSharedLimit);
  b.shared_words.resize(b.shared.size() / 4);
  b.warp_epoch.assign((n + 31) / 32, 1);
  for (unsigned z = 0; z < grid.z; ++z)
    for (unsigned y = 0; y < grid.y; ++y)
      for (unsigned x = 0; x < grid.x; ++x) {
        b.block_idx = {x, y, z};
        b.static_offsets.clear();
        b.static_shared_used = 0;
        // Shared memory starts with garbage on a GPU: a kernel that reads before writing sees
        // NaNs. (Static arrays are reset as they are declared, in block_shared.)
        reset_shared(b, 0, b.dynamic_shared);
        b.barrier_epoch = 1;
        for (size_t i = 0; i < n; ++i) {
          ThreadState& t = b.threads[i];
          t = ThreadState{};
          t.linear = unsigned(i);
          t.thread_idx = {unsigned(i % block.x), unsigned(i / block.x % block.y),
                          unsigned(i / (size_t(block.x) * block.y))};
          t.block = &b;
        }
        run_block(b, body, seed ? &shuffle : nullptr);
        if (!b.failure.empty()) return b.failure;
      }
  return {};
}

}  // namespace dsx::emu
