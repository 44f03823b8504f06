// Shared host allocations and their registry (see host_memory.h).
#include "comm/host_memory.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <string>

#include "dsx/error.h"

namespace dsx::comm {

namespace {

struct Allocation {
  size_t bytes;  // mapped, a whole number of pages
  int fd;        // -1: ordinary memory (no memfd here)
  uint64_t id;
  uint64_t inode;
  bool live;     // false: freed, kept for the next allocation of its size
};

// Freed allocations kept for reuse, at most this many bytes: ZeRO frees and allocates buffers of
// the same sizes every step, and a new memfd costs six system calls here and a new mapping in
// every peer (measured: ~10 memfds per rank and step in the main job, 3% of its throughput).
// A reused allocation keeps its number, so the peers' mappings of it stay valid.
constexpr size_t kSpareBytesKept = size_t{256} << 20;

struct Registry {
  std::mutex mutex;
  std::map<uintptr_t, Allocation> by_base;
  std::multimap<size_t, uintptr_t> spare;  // freed allocations by size
  size_t spare_bytes = 0;
  uint64_t next_id = 1;
};

Registry& registry() {
  static Registry* r = new Registry;  // never destroyed: buffers may be freed during exit
  return *r;
}

size_t page_rounded(size_t bytes) {
  const auto page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return (bytes + page - 1) / page * page;
}

[[noreturn]] void out_of_memory(size_t bytes, const std::string& why) {
  throw Error(ErrorKind::OutOfMemory, "out of host memory allocating " + std::to_string(bytes) + " bytes (" + why +
                                          "); use a higher ZeRO stage, more ranks, or a smaller model/batch");
}

std::string errno_text(const char* call) { return std::string(call) + ": " + std::strerror(errno); }

// A memfd of `bytes`, its pages reserved now (fallocate) so that running out of memory is this
// error rather than a SIGBUS on first touch. fallocate would take pages until the OOM killer
// came, so a request beyond the memory available is refused first. -1 when this host has no memfd.
int shared_memfd(size_t bytes, uint64_t& inode) {
  if (size_t available = available_host_memory(); available != 0 && bytes > available) {
    out_of_memory(bytes, "only " + std::to_string(available) + " bytes available");
  }
  int fd = memfd_create("dsx-shared-host", MFD_CLOEXEC);
  if (fd < 0) return -1;
  struct stat st {};
  if (ftruncate(fd, static_cast<off_t>(bytes)) != 0 || fallocate(fd, 0, 0, static_cast<off_t>(bytes)) != 0 ||
      fstat(fd, &st) != 0) {
    int saved = errno;
    close(fd);
    errno = saved;
    if (saved == ENOMEM || saved == ENOSPC) out_of_memory(bytes, errno_text("fallocate of a memfd"));
    return -1;
  }
  inode = static_cast<uint64_t>(st.st_ino);
  return fd;
}

}  // namespace

void* allocate_shared_host(size_t bytes) {
  const size_t mapped = page_rounded(bytes == 0 ? 1 : bytes);
  Registry& r = registry();
  {
    std::unique_lock lock(r.mutex);
    if (auto spare = r.spare.find(mapped); spare != r.spare.end()) {
      auto* p = reinterpret_cast<void*>(spare->second);
      r.by_base.at(spare->second).live = true;
      r.spare_bytes -= mapped;
      r.spare.erase(spare);
      lock.unlock();
      std::memset(p, 0, mapped);
      return p;
    }
  }
  uint64_t inode = 0;
  int fd = shared_memfd(mapped, inode);
  void* p = fd >= 0 ? mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)
                    : mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    if (fd >= 0) close(fd);
    out_of_memory(bytes, errno_text("mmap"));
  }
  // A forked child must not share (and write) the parent's buffers, as with RDMA memory.
  madvise(p, mapped, MADV_DONTFORK);
  std::lock_guard lock(r.mutex);
  r.by_base[reinterpret_cast<uintptr_t>(p)] = Allocation{mapped, fd, r.next_id++, inode, true};
  return p;
}

bool free_shared_host(void* p) {
  if (!p) return false;
  Registry& r = registry();
  Allocation a{};
  {
    std::lock_guard lock(r.mutex);
    auto it = r.by_base.find(reinterpret_cast<uintptr_t>(p));
    if (it == r.by_base.end() || !it->second.live) return false;  // not ours (any more)
    a = it->second;
    if (r.spare_bytes + a.bytes <= kSpareBytesKept) {
      it->second.live = false;
      r.spare.emplace(a.bytes, it->first);
      r.spare_bytes += a.bytes;
      return true;
    }
    r.by_base.erase(it);
  }
  munmap(p, a.bytes);
  if (a.fd >= 0) close(a.fd);
  return true;
}

size_t available_host_memory() {
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  size_t kib = 0;
  while (meminfo >> key >> kib) {
    if (key == "MemAvailable:") return kib * 1024;
    meminfo.ignore(64, '\n');
  }
  return 0;
}

std::optional<SharedHostRegion> find_shared_host_region(const void* p, size_t bytes) {
  const auto at = reinterpret_cast<uintptr_t>(p);
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  auto it = r.by_base.upper_bound(at);
  if (it == r.by_base.begin()) return std::nullopt;
  --it;
  const Allocation& a = it->second;
  const size_t offset = at - it->first;
  if (a.fd < 0 || !a.live || offset + bytes > a.bytes) return std::nullopt;
  return SharedHostRegion{a.fd, a.id, a.inode, offset};
}

}  // namespace dsx::comm
