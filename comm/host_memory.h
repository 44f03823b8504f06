// Host memory that the other ranks of this host can map: the CPU counterpart of NCCL's
// ncclMemAlloc + buffer registration. A collective over shared memory (ofi/shm) whose buffers
// come from here on every rank reads its peers' data where it lies instead of copying it through
// staging slots first (half the memory traffic; docs/comm.md). Any other memory still works,
// through the slots.
//
// Each allocation is its own anonymous memfd, kept open while the allocation lives so that a peer
// can open it through /proc/<pid>/fd; nothing is left in /dev/shm when the process dies.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

namespace dsx::comm {

// Collectives read buffers in place from this size (CommOptions::shared_memory_in_place_bytes
// by default); smaller allocations gain nothing from being shared.
inline constexpr size_t kInPlaceMinBytes = size_t{64} << 10;

// Page-aligned, zero-filled, `bytes` > 0. Falls back to ordinary memory (which collectives copy
// through their slots) when memfd is unavailable. Throws Error(OutOfMemory) when both fail.
void* allocate_shared_host(size_t bytes);
// Frees what allocate_shared_host returned; false (and nothing done) for any other pointer.
// Up to 256 MiB of freed allocations are kept and handed out again for the same page-rounded
// size (zero-filled again): buffers that come and go every step keep their peers' mappings.
bool free_shared_host(void* p);

// Where a buffer lies, for a peer to map it: the memfd of the allocation that holds
// [p, p + bytes), the offset of p in it, and the allocation's number (never reused in this
// process) and inode (so a peer can check that the fd it opened is this allocation).
struct SharedHostRegion {
  int fd;
  uint64_t id;
  uint64_t inode;
  size_t offset;
};
std::optional<SharedHostRegion> find_shared_host_region(const void* p, size_t bytes);

// The memory this host can still give (MemAvailable of /proc/meminfo), in bytes; 0 when unknown.
// allocate_shared_host refuses a request beyond it.
size_t available_host_memory();

// A std allocator over allocate_shared_host, for containers that collectives read.
template <typename T>
struct SharedHostAllocator {
  using value_type = T;
  SharedHostAllocator() = default;
  template <typename U>
  SharedHostAllocator(const SharedHostAllocator<U>&) {}
  T* allocate(size_t n) { return static_cast<T*>(allocate_shared_host(n * sizeof(T))); }
  void deallocate(T* p, size_t) { free_shared_host(p); }
  template <typename U>
  bool operator==(const SharedHostAllocator<U>&) const { return true; }
};

}  // namespace dsx::comm
