#include "tests/emulated_gpu/nccl_shm.h"

#include <fcntl.h>
#include <linux/futex.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <thread>

namespace dsx::emu::nccl {
namespace {

constexpr size_t kPage = 4096;
size_t pages(size_t bytes) { return (bytes + kPage - 1) / kPage * kPage; }

// The segment is shared between processes: the futex must not be the private kind.
void futex_wait(std::atomic<uint32_t>* word, uint32_t seen, std::chrono::microseconds limit) {
  timespec ts{time_t(limit.count() / 1000000), long(limit.count() % 1000000) * 1000};
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT, seen, &ts, nullptr, 0);
}
void futex_wake(std::atomic<uint32_t>* word) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE, INT32_MAX, nullptr, nullptr, 0);
}

// A process that exited but was not reaped yet still answers kill(pid, 0): ask /proc too.
bool process_gone(int pid) {
  if (kill(pid, 0) != 0 && errno == ESRCH) return true;
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t paren = stat.rfind(')');
  if (paren == std::string::npos || paren + 2 >= stat.size()) return false;
  const char state = stat[paren + 2];
  return state == 'Z' || state == 'X';
}

}  // namespace

bool Segment::open(const std::string& name, int nranks, std::string* why) {
  name_ = name;
  nranks_ = nranks;
  const size_t n = size_t(nranks);
  const size_t ranks_at = kPage, channels_at = ranks_at + pages(n * sizeof(RankArea));
  const size_t slots_at = channels_at + pages(n * n * sizeof(Channel));
  const size_t rings_at = slots_at + n * kSlotBytes;
  bytes_ = rings_at + n * n * kRingBytes;
  const int fd = shm_open(name.c_str(), O_RDWR | O_CREAT, 0600);
  if (fd < 0) {
    *why = "shm_open(" + name + "): " + std::strerror(errno);
    return false;
  }
  struct stat st {};
  // Only ever grows: a rank that maps it already must not find its pages gone.
  if (fstat(fd, &st) != 0 || (size_t(st.st_size) < bytes_ && ftruncate(fd, off_t(bytes_)) != 0)) {
    *why = "sizing " + name + ": " + std::strerror(errno);
    close(fd);
    return false;
  }
  base_ = mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (base_ == MAP_FAILED) {
    base_ = nullptr;
    *why = "mmap(" + name + "): " + std::strerror(errno);
    return false;
  }
  auto* at = static_cast<std::byte*>(base_);
  header_ = reinterpret_cast<Header*>(at);
  ranks_ = reinterpret_cast<RankArea*>(at + ranks_at);
  channels_ = reinterpret_cast<Channel*>(at + channels_at);
  slots_ = at + slots_at;
  rings_ = at + rings_at;
  // The first rank records the rank count; the others check theirs against it.
  uint32_t unclaimed = 0;
  if (header_->claimed.compare_exchange_strong(unclaimed, 1)) {
    header_->nranks = nranks;
    header_->claimed.store(2, std::memory_order_release);
  } else {
    for (int i = 0; header_->claimed.load(std::memory_order_acquire) != 2; ++i) {
      if (i > 5000) {
        *why = name + " was never set up by the rank that created it";
        return false;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  if (header_->nranks != nranks) {
    *why = "this rank was told the communicator has " + std::to_string(nranks) +
           " ranks, another rank was told " + std::to_string(header_->nranks);
    return false;
  }
  return true;
}

Segment::~Segment() {
  if (base_) munmap(base_, bytes_);
}

void Segment::unlink() {
  if (unlinked_ || name_.empty()) return;
  unlinked_ = true;
  shm_unlink(name_.c_str());  // ENOENT when another rank did it first: fine
}

void Segment::ring_doorbell() {
  header_->doorbell.fetch_add(1, std::memory_order_acq_rel);
  futex_wake(&header_->doorbell);
}

std::string Segment::peer_gone(int r) {
  const std::string who = "rank " + std::to_string(r);
  switch (rank(r).state.load(std::memory_order_acquire)) {
    case kLeft:
      return who + " destroyed its communicator";
    case kAborted:
      return who + " aborted its communicator";
    default:
      break;
  }
  const int pid = rank(r).pid.load(std::memory_order_acquire);
  if (pid > 0 && process_gone(pid)) return who + " (process " + std::to_string(pid) + ") exited";
  return {};
}

WaitEnd Segment::wait(const std::function<int()>& waiting_for, const std::atomic<bool>& aborted,
                      std::chrono::duration<double> limit) {
  using Clock = std::chrono::steady_clock;
  // Most waits are short (the peer is a step behind): a few yields first, then sleep.
  for (int i = 0; i < 64; ++i) {
    if (waiting_for() < 0) return {};
    std::this_thread::yield();
  }
  const auto start = Clock::now();
  auto next_check = start;
  for (;;) {
    const uint32_t bell = header_->doorbell.load(std::memory_order_acquire);
    const int r = waiting_for();
    if (r < 0) return {};
    if (aborted.load()) return {WaitEnd::kAborted, r, {}};
    const auto now = Clock::now();
    if (now - start > limit) return {WaitEnd::kTimeout, r, {}};
    if (now >= next_check) {  // reading /proc costs: not on every wake
      next_check = now + std::chrono::milliseconds(50);
      std::string gone = peer_gone(r);
      if (!gone.empty()) return {WaitEnd::kPeerGone, r, gone};
    }
    futex_wait(&header_->doorbell, bell, std::chrono::microseconds(10000));
  }
}

}  // namespace dsx::emu::nccl
