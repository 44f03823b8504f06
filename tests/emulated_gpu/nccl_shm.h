// The emulated NCCL's shared memory: one POSIX shm segment per communicator, named by its unique
// id, that every rank process maps. It holds each rank's state and barrier counter, a staging
// slot per rank for collectives, and a ring per ordered pair of ranks for send/recv. Every change
// rings one doorbell (a futex), so a waiter spins briefly, then sleeps until something changed.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

namespace dsx::emu::nccl {

// Fixed staging sizes: larger buffers go through in chunks.
constexpr size_t kSlotBytes = size_t{1} << 20;    // per rank, for collectives
constexpr size_t kRingBytes = size_t{256} << 10;  // per ordered pair of ranks, for send/recv

enum RankState : int32_t { kAbsent = 0, kAttached = 1, kLeft = 2, kAborted = 3 };

// What a rank's current collective is, so the others can tell when the ranks disagree.
struct OpInfo {
  int32_t kind, dtype, op, root;
  uint64_t count;
};

struct alignas(64) RankArea {
  std::atomic<int32_t> pid;       // 0 until the rank attached
  std::atomic<int32_t> state;     // RankState
  int32_t gpu;                    // the physical GPU it runs on
  std::atomic<uint64_t> arrived;  // collective barriers passed
  OpInfo op;
};

// Sender -> receiver. Counters only grow: messages are numbered from 1, bytes cumulative.
struct alignas(64) Channel {
  std::atomic<uint64_t> posted;         // receives the receiver has started
  std::atomic<uint64_t> offered;        // sends the sender has started
  std::atomic<uint64_t> offered_bytes;  // the size of send `offered`
  std::atomic<uint64_t> head, tail;     // bytes written into / taken from the ring
  std::atomic<int32_t> broken;          // the receiver refused the message (sizes differ)
};

struct Header {
  std::atomic<uint32_t> doorbell;  // the futex word
  std::atomic<uint32_t> claimed;   // 0, 1 while the first rank sets nranks, 2 once it did
  int32_t nranks;
  std::atomic<int32_t> attached;
};

// Why a wait ended.
struct WaitEnd {
  enum Kind { kReady, kTimeout, kAborted, kPeerGone } kind = kReady;
  int rank = -1;       // whom it waited for
  std::string reason;  // kPeerGone: what happened to that rank
};

class Segment {
 public:
  // Opens (or creates) and maps the segment `name` sized for `nranks`; false with *why on failure.
  bool open(const std::string& name, int nranks, std::string* why);
  ~Segment();
  void unlink();  // once every rank has it mapped (or gave up): nothing is left in /dev/shm

  Header& header() { return *header_; }
  RankArea& rank(int r) { return ranks_[r]; }
  Channel& channel(int from, int to) {
    return channels_[size_t(from) * size_t(nranks_) + size_t(to)];
  }
  std::byte* slot(int r) { return slots_ + size_t(r) * kSlotBytes; }
  std::byte* ring(int from, int to) {
    return rings_ + (size_t(from) * size_t(nranks_) + size_t(to)) * kRingBytes;
  }

  void ring_doorbell();
  // Waits until `waiting_for` returns -1; it returns the rank still awaited otherwise. Ends early
  // when `aborted` is set, after `limit` without `waiting_for` turning -1, or when the awaited
  // rank's process is gone or it left the communicator.
  WaitEnd wait(const std::function<int()>& waiting_for, const std::atomic<bool>& aborted,
               std::chrono::duration<double> limit);
  // "" while rank `r` is attached and its process runs, else what happened to it.
  std::string peer_gone(int r);

 private:
  std::string name_;
  bool unlinked_ = false;
  void* base_ = nullptr;
  size_t bytes_ = 0;
  int nranks_ = 0;
  Header* header_ = nullptr;
  RankArea* ranks_ = nullptr;
  Channel* channels_ = nullptr;
  std::byte* slots_ = nullptr;
  std::byte* rings_ = nullptr;
};

}  // namespace dsx::emu::nccl
