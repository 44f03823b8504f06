// Set-up, mapping and waiting of the shared-memory segments (see host_segments.h).
#include "comm/ofi/host_segments.h"

#include <fcntl.h>
#include <linux/futex.h>
#include <poll.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <new>
#include <random>
#include <sstream>

#include "comm/host_memory.h"
#include "comm/rendezvous.h"
#include "dsx/error.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define DSX_SPIN_PAUSE() _mm_pause()
#else
#define DSX_SPIN_PAUSE() std::atomic_signal_fence(std::memory_order_seq_cst)
#endif

namespace dsx::comm::ofi {

namespace {

// A wait first busy-polls (a microsecond or two: the peer is usually that close), then yields
// its core (a rank waiting for another on the same core hands it over at once; with nothing
// else to run the yield returns at once and is only a slower poll), then sleeps on the futex
// (the peer is far behind or not running: leave the core to whoever needs it).
constexpr int kSpinsBeforeYield = 64;
constexpr int kSpinsBeforeSleep = kSpinsBeforeYield + 2048;
// A sleep is bounded so the wait keeps checking its deadline and the peers' health.
constexpr long kSleepNanoseconds = 1'000'000;

// The futex is the counter's low 32 bits (every target is little-endian); it changes with
// every round. Not FUTEX_PRIVATE: the waker is another process.
uint32_t* futex_word(std::atomic<uint64_t>& counter) { return reinterpret_cast<uint32_t*>(&counter); }

std::string errno_text(const char* call) { return std::string(call) + ": " + std::strerror(errno); }

uint64_t random_nonce() {
  std::random_device device;
  return (uint64_t{device()} << 32) ^ device();
}

// Step 3 of open: publishes this rank's outcome (`problem`, "" for success) and reads every other
// rank's; returns the first reason any rank gave, or "" when every rank mapped every segment.
std::string agree_on_segments(Store& store, const std::string& keys, int rank, int size, const std::string& problem,
                              std::chrono::milliseconds timeout) {
  store.set(keys + "mapped/" + std::to_string(rank), problem.empty() ? "ok" : "-" + problem);
  std::string why_not;
  for (int q = 0; q < size; ++q) {
    std::string said = q == rank ? (problem.empty() ? "ok" : "-" + problem)
                                 : get_from_peers(store, keys + "mapped/" + std::to_string(q), timeout);
    if (said != "ok" && why_not.empty()) why_not = said.substr(1);
  }
  return why_not;
}

}  // namespace

std::string HostSegments::create_own(uint64_t nonce, int& fd) {
  const size_t bytes = segment_bytes();
  fd = memfd_create("dsx-comm", MFD_CLOEXEC);
  if (fd < 0) return errno_text("memfd_create");
  if (ftruncate(fd, static_cast<off_t>(bytes)) != 0) return errno_text("ftruncate of the segment");
  void* base = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
  if (base == MAP_FAILED) return errno_text("mmap of the segment");
  bases_[static_cast<size_t>(rank_)] = static_cast<char*>(base);
  auto* header = new (base) Header{};
  header->nonce.value.store(nonce, std::memory_order_release);
  return "";
}

std::string HostSegments::map_peer(int q, const std::string& entry) {
  const size_t bytes = segment_bytes();
  long pid = 0, peer_fd = 0;
  unsigned long long peer_nonce = 0;
  std::istringstream(entry) >> pid >> peer_fd >> peer_nonce;
  const std::string path = "/proc/" + std::to_string(pid) + "/fd/" + std::to_string(peer_fd);
  const std::string not_its = path + " is not rank " + std::to_string(q) + "'s segment (another pid namespace?)";
  const int peer = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (peer < 0) return errno_text(("open " + path).c_str());
  struct stat st {};
  void* base = MAP_FAILED;
  std::string problem;
  if (fstat(peer, &st) != 0 || static_cast<size_t>(st.st_size) != bytes) {
    problem = not_its;
  } else if ((base = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, peer, 0)) == MAP_FAILED) {
    problem = errno_text(("mmap " + path).c_str());
  }
  close(peer);
  if (base == MAP_FAILED) return problem;
  bases_[static_cast<size_t>(q)] = static_cast<char*>(base);
  if (header(q).nonce.value.load(std::memory_order_acquire) != peer_nonce) return not_its;
  pidfds_[static_cast<size_t>(q)] = static_cast<int>(syscall(SYS_pidfd_open, static_cast<pid_t>(pid), 0));
  pids_[static_cast<size_t>(q)] = pid;
  return "";
}

HostSegments::Setup HostSegments::open(Store& store, const std::string& keys, int rank, int size, size_t chunk_bytes,
                                       bool enabled, const std::string& disabled_reason,
                                       std::chrono::milliseconds timeout) {
  std::unique_ptr<HostSegments> seg(new HostSegments(rank, chunk_bytes));
  seg->bases_.assign(static_cast<size_t>(size), nullptr);
  seg->pidfds_.assign(static_cast<size_t>(size), -1);
  seg->pids_.assign(static_cast<size_t>(size), 0);
  seg->peer_regions_.resize(static_cast<size_t>(size));
  const std::string me = "rank " + std::to_string(rank) + " of the group";

  // 1. Our own segment, published as "<pid> <fd> <nonce>", or "-<why not>".
  std::string problem = enabled ? "" : disabled_reason;
  int fd = -1;
  uint64_t nonce = random_nonce();
  if (problem.empty()) {
    problem = seg->create_own(nonce, fd);
    if (!problem.empty()) problem = me + ": " + problem;
  }
  store.set(keys + "segment/" + std::to_string(rank),
            problem.empty() ? std::to_string(getpid()) + " " + std::to_string(fd) + " " + std::to_string(nonce)
                            : "-" + problem);

  // 2. Every peer's segment, mapped through /proc and checked by its nonce.
  for (int q = 0; q < size && problem.empty(); ++q) {
    if (q == rank) continue;
    std::string entry = get_from_peers(store, keys + "segment/" + std::to_string(q), timeout);
    if (!entry.empty() && entry[0] == '-') {
      problem = entry.substr(1);
      break;
    }
    problem = seg->map_peer(q, entry);
    if (!problem.empty()) problem = me + " cannot map rank " + std::to_string(q) + "'s segment: " + problem;
  }

  // 3. Agree: everyone has mapped everything (so our fd may close), or nobody uses the segments.
  Setup result;
  result.why_not = agree_on_segments(store, keys, rank, size, problem, timeout);
  if (fd >= 0) close(fd);
  if (result.why_not.empty()) result.segments = std::move(seg);
  return result;  // otherwise `seg` unmaps whatever it mapped
}

HostSegments::~HostSegments() {
  for (char* base : bases_) {
    if (base) munmap(base, segment_bytes());
  }
  for (const auto& regions : peer_regions_) {
    for (const PeerRegion& region : regions) munmap(region.base, region.bytes);
  }
  for (int fd : pidfds_) {
    if (fd >= 0) close(fd);
  }
}

bool HostSegments::peer_exited(int peer) const {
  int fd = pidfds_[static_cast<size_t>(peer)];
  if (fd < 0) return false;
  pollfd p{fd, POLLIN, 0};
  return poll(&p, 1, 0) > 0 && (p.revents & POLLIN);
}

void HostSegments::publish(Counter c, uint64_t value) {
  std::atomic<uint64_t>& word = counter(rank_, c);
  // seq_cst on both sides (here and in wait) so that either the sleeper sees the new value or
  // we see the sleeper.
  word.store(value, std::memory_order_seq_cst);
  if (header(rank_).sleepers.value.load(std::memory_order_seq_cst) != 0) {
    syscall(SYS_futex, futex_word(word), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
  }
}

void HostSegments::wait(int peer, Counter c, uint64_t at_least, const KeepAlive& keep_alive, const char* what) const {
  std::atomic<uint64_t>& word = counter(peer, c);
  for (int spins = 0;; ++spins) {
    uint64_t now = word.load(std::memory_order_acquire);
    if (now >= at_least) return;
    if ((spins & 1023) == 1023) keep_alive(peer, what, peer_exited(peer));
    if (spins < kSpinsBeforeYield) {
      DSX_SPIN_PAUSE();
      continue;
    }
    if (spins < kSpinsBeforeSleep) {
      sched_yield();
      continue;
    }
    std::atomic<uint64_t>& sleepers = header(peer).sleepers.value;
    sleepers.fetch_add(1, std::memory_order_seq_cst);
    now = word.load(std::memory_order_seq_cst);
    if (now < at_least) {
      timespec limit{0, kSleepNanoseconds};
      syscall(SYS_futex, futex_word(word), FUTEX_WAIT, static_cast<uint32_t>(now), &limit, nullptr, 0);
    }
    sleepers.fetch_sub(1, std::memory_order_seq_cst);
    keep_alive(peer, what, peer_exited(peer));
  }
}

std::vector<char*> HostSegments::map_buffers(void* data, size_t bytes, const KeepAlive& keep_alive) {
  static_assert(sizeof(Header) <= kHeaderBytes);
  const std::optional<SharedHostRegion> mine = find_shared_host_region(data, bytes);
  BufferPlace& place = header(rank_).buffer;
  place = mine ? BufferPlace{mine->fd, mine->id, mine->inode, mine->offset} : BufferPlace{-1, 0, 0, 0};
  publish(kAnnounced, ++announced_);
  std::vector<BufferPlace> places(static_cast<size_t>(size()));
  for (int q = 0; q < size(); ++q) {
    if (q == rank_) continue;
    wait(q, kAnnounced, announced_, keep_alive, "to say where its buffer is");
    places[static_cast<size_t>(q)] = header(q).buffer;
  }
  // Every rank has read the same places, so every rank takes the same path.
  if (!mine) return {};
  for (int q = 0; q < size(); ++q) {
    if (q != rank_ && places[static_cast<size_t>(q)].fd < 0) return {};
  }
  std::vector<char*> buffers(static_cast<size_t>(size()));
  for (int q = 0; q < size(); ++q) {
    const BufferPlace& at = places[static_cast<size_t>(q)];
    buffers[static_cast<size_t>(q)] = q == rank_ ? static_cast<char*>(data) : peer_region(q, at) + at.offset;
  }
  return buffers;
}

char* HostSegments::peer_region(int peer, const BufferPlace& place) {
  std::vector<PeerRegion>& regions = peer_regions_[static_cast<size_t>(peer)];
  for (PeerRegion& region : regions) {
    if (region.id == place.id) {
      region.last_used = announced_;
      return region.base;
    }
  }
  // The peer keeps the fd open while the allocation lives and it is inside this operation; the
  // inode tells its allocation from anything else that fd number might name.
  const std::string path =
      "/proc/" + std::to_string(pids_[static_cast<size_t>(peer)]) + "/fd/" + std::to_string(place.fd);
  const std::string what =
      "rank " + std::to_string(rank_) + " of the group cannot map rank " + std::to_string(peer) + "'s buffer: ";
  int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) throw Error(ErrorKind::Comm, what + errno_text(("open " + path).c_str()));
  struct stat st {};
  void* base = MAP_FAILED;
  std::string problem;
  if (fstat(fd, &st) != 0 || static_cast<uint64_t>(st.st_ino) != place.inode) {
    problem = path + " is no longer that buffer (was it freed during the operation?)";
  } else {
    base = mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (base == MAP_FAILED) problem = errno_text(("mmap " + path).c_str());
  }
  close(fd);
  if (!problem.empty()) throw Error(ErrorKind::Comm, what + problem);
  if (regions.size() >= kPeerRegionsKept) {
    auto oldest = std::min_element(regions.begin(), regions.end(),
                                   [](const PeerRegion& a, const PeerRegion& b) { return a.last_used < b.last_used; });
    munmap(oldest->base, oldest->bytes);
    regions.erase(oldest);
  }
  regions.push_back(PeerRegion{place.id, static_cast<char*>(base), static_cast<size_t>(st.st_size), announced_});
  return static_cast<char*>(base);
}

}  // namespace dsx::comm::ofi
