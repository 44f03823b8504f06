#include "tests/emulated_gpu/memory.h"

#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <vector>

namespace dsx::emu {
namespace {

constexpr size_t kAlignment = 256;  // what cudaMalloc guarantees

size_t rounded(size_t bytes) { return ((bytes ? bytes : 1) + kAlignment - 1) & ~(kAlignment - 1); }

// One device's memory: a reserved region, first fit over its free ranges.
struct Arena {
  std::byte* base = nullptr;
  size_t bytes = 0;
  size_t used = 0;
  std::map<size_t, size_t> free_ranges;  // offset -> bytes
  std::map<size_t, size_t> live;         // offset -> bytes
};

struct Memory {
  std::mutex mutex;
  std::vector<Arena> arenas;
  std::map<const std::byte*, size_t> pinned;  // base -> bytes
  std::mutex access_mutex;
  int access_count = 0;
  bool protected_now = true;  // the arenas are reserved PROT_NONE
  struct sigaction previous_segv {};
};

// Never destroyed: stream workers may still run while the process exits.
Memory& memory() {
  static Memory* m = new Memory;
  return *m;
}

void protect_all(int protection) {
  for (Arena& a : memory().arenas) mprotect(a.base, a.bytes, protection);
}

// A host thread touched device memory while no stream's work ran: say which allocation, then
// let the fault take its course.
void on_segv(int sig, siginfo_t* info, void* context) {
  Memory& m = memory();
  const auto* at = static_cast<const std::byte*>(info->si_addr);
  for (size_t d = 0; d < m.arenas.size(); ++d) {
    const Arena& a = m.arenas[d];
    if (at < a.base || at >= a.base + a.bytes) continue;
    char line[320];
    const size_t offset = size_t(at - a.base);
    size_t alloc_offset = 0, alloc_bytes = 0;
    if (m.mutex.try_lock()) {
      auto it = a.live.upper_bound(offset);
      if (it != a.live.begin() && (--it)->first + it->second > offset) {
        alloc_offset = it->first;
        alloc_bytes = it->second;
      }
      m.mutex.unlock();
    }
    int n = alloc_bytes
                ? std::snprintf(line, sizeof line,
                                "dsx emulated GPU: the host touched device memory at %p, byte %zu "
                                "of a %zu-byte allocation on GPU %zu; copy it with cudaMemcpy "
                                "first\n",
                                info->si_addr, offset - alloc_offset, alloc_bytes, d)
                : std::snprintf(line, sizeof line,
                                "dsx emulated GPU: the host touched GPU %zu's memory at %p, which "
                                "no live allocation holds\n",
                                d, info->si_addr);
    if (write(2, line, size_t(n)) < 0) _exit(134);
    break;
  }
  // Hand the fault on: to the handler before ours, else the default (the process dies).
  if (m.previous_segv.sa_flags & SA_SIGINFO && m.previous_segv.sa_sigaction) {
    m.previous_segv.sa_sigaction(sig, info, context);
    return;
  }
  if (m.previous_segv.sa_handler != SIG_DFL && m.previous_segv.sa_handler != SIG_IGN &&
      m.previous_segv.sa_handler) {
    m.previous_segv.sa_handler(sig);
    return;
  }
  signal(SIGSEGV, SIG_DFL);
}

// Reserves every visible device's region once (address space only; pages come as touched).
void ensure_arenas() {
  Memory& m = memory();
  if (!m.arenas.empty()) return;
  const int n = device_count();
  m.arenas.resize(size_t(n));
  for (Arena& a : m.arenas) {
    a.bytes = device_memory_bytes();
    void* p = mmap(nullptr, a.bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) {
      say("cannot reserve " + std::to_string(a.bytes) +
          " bytes of address space for a GPU; set DSX_EMULATED_GPU_MEMORY lower");
      std::abort();
    }
    a.base = static_cast<std::byte*>(p);
    a.free_ranges[0] = a.bytes;
  }
  struct sigaction action {};
  action.sa_sigaction = on_segv;
  action.sa_flags = SA_SIGINFO | SA_NODEFER;
  sigemptyset(&action.sa_mask);
  sigaction(SIGSEGV, &action, &m.previous_segv);
}

}  // namespace

void* device_allocate(int device, size_t bytes) {
  Memory& m = memory();
  std::lock_guard lock(m.mutex);
  ensure_arenas();
  if (device < 0 || size_t(device) >= m.arenas.size()) return nullptr;
  Arena& a = m.arenas[size_t(device)];
  const size_t size = rounded(bytes);
  for (auto it = a.free_ranges.begin(); it != a.free_ranges.end(); ++it) {
    if (it->second < size) continue;
    const size_t offset = it->first, rest = it->second - size;
    a.free_ranges.erase(it);
    if (rest) a.free_ranges[offset + size] = rest;
    a.live[offset] = size;
    a.used += size;
    return a.base + offset;
  }
  return nullptr;
}

bool device_free(void* p) {
  Memory& m = memory();
  std::lock_guard lock(m.mutex);
  for (Arena& a : m.arenas) {
    const auto* at = static_cast<std::byte*>(p);
    if (at < a.base || at >= a.base + a.bytes) continue;
    auto it = a.live.find(size_t(at - a.base));
    if (it == a.live.end()) return false;
    size_t offset = it->first, size = it->second;
    a.live.erase(it);
    a.used -= size;
    auto next = a.free_ranges.lower_bound(offset);
    if (next != a.free_ranges.end() && offset + size == next->first) {
      size += next->second;
      next = a.free_ranges.erase(next);
    }
    if (next != a.free_ranges.begin()) {
      auto prev = std::prev(next);
      if (prev->first + prev->second == offset) {
        prev->second += size;
        return true;
      }
    }
    a.free_ranges[offset] = size;
    return true;
  }
  return false;
}

size_t device_used(int device) {
  Memory& m = memory();
  std::lock_guard lock(m.mutex);
  ensure_arenas();
  return device >= 0 && size_t(device) < m.arenas.size() ? m.arenas[size_t(device)].used : 0;
}

void* pinned_allocate(size_t bytes) {
  void* p = std::aligned_alloc(kAlignment, rounded(bytes));
  if (!p) return nullptr;
  Memory& m = memory();
  std::lock_guard lock(m.mutex);
  m.pinned[static_cast<std::byte*>(p)] = bytes;
  return p;
}

bool pinned_free(void* p) {
  Memory& m = memory();
  {
    std::lock_guard lock(m.mutex);
    if (!m.pinned.erase(static_cast<std::byte*>(p))) return false;
  }
  std::free(p);
  return true;
}

PointerInfo locate(const void* p) {
  Memory& m = memory();
  std::lock_guard lock(m.mutex);
  ensure_arenas();
  const auto* at = static_cast<const std::byte*>(p);
  PointerInfo info;
  for (size_t d = 0; d < m.arenas.size(); ++d) {
    const Arena& a = m.arenas[d];
    if (at < a.base || at >= a.base + a.bytes) continue;
    info.kind = MemoryKind::Device;
    info.device = int(d);
    auto it = a.live.upper_bound(size_t(at - a.base));
    if (it != a.live.begin() && (--it)->first + it->second > size_t(at - a.base)) {
      info.base = a.base + it->first;
      info.bytes = it->second;
    }
    return info;
  }
  auto it = m.pinned.upper_bound(at);
  if (it != m.pinned.begin() && (--it)->first + it->second > at) {
    info.kind = MemoryKind::Pinned;
    info.base = it->first;
    info.bytes = it->second;
  }
  return info;
}

bool check_range(const void* p, size_t bytes, MemoryKind kind, std::string* why) {
  static const char* names[] = {"pageable host memory", "pinned host memory", "device memory"};
  const PointerInfo info = locate(p);
  auto refuse = [&](const std::string& what) {
    if (why) *why = what;
    return false;
  };
  if (kind == MemoryKind::Pageable) {
    if (info.kind == MemoryKind::Device)
      return refuse("pointer " + std::to_string(reinterpret_cast<uintptr_t>(p)) +
                    " is device memory (GPU " + std::to_string(info.device) + "), not host memory");
    return true;
  }
  if (info.kind != kind)
    return refuse("pointer " + std::to_string(reinterpret_cast<uintptr_t>(p)) + " is " +
                  names[int(info.kind)] + ", not " + names[int(kind)]);
  if (!info.base)
    return refuse("pointer " + std::to_string(reinterpret_cast<uintptr_t>(p)) +
                  " is in no live allocation (freed, or never allocated)");
  const auto* at = static_cast<const std::byte*>(p);
  const auto* base = static_cast<const std::byte*>(info.base);
  if (at + bytes > base + info.bytes)
    return refuse(std::to_string(bytes) + " bytes from byte " + std::to_string(at - base) +
                  " run past the end of a " + std::to_string(info.bytes) + "-byte allocation");
  return true;
}

// mprotect costs a page-table walk over every page in use, so device memory is opened when
// stream work starts and closed again only where the host could next look: after it waited for
// the device (protect_if_idle), not after every kernel.
void begin_device_access() {
  Memory& m = memory();
  std::lock_guard lock(m.access_mutex);
  ++m.access_count;
  if (m.protected_now) {
    std::lock_guard arenas(m.mutex);
    ensure_arenas();
    protect_all(PROT_READ | PROT_WRITE);
    m.protected_now = false;
  }
}

void end_device_access() {
  Memory& m = memory();
  std::lock_guard lock(m.access_mutex);
  --m.access_count;
}

void protect_if_idle() {
  Memory& m = memory();
  std::lock_guard lock(m.access_mutex);
  if (m.access_count == 0 && !m.protected_now) {
    std::lock_guard arenas(m.mutex);
    protect_all(PROT_NONE);
    m.protected_now = true;
  }
}

}  // namespace dsx::emu
