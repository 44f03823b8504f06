// Shared memory between the ranks of one group on one host, for collectives that bypass the
// fabric (as NCCL's and Open MPI's intra-node transports do). Each rank owns one segment: an
// anonymous memfd that its peers open through /proc/<pid>/fd and map, so nothing is left behind
// in /dev/shm when a rank dies. A segment holds three progress counters, written only by its
// owner, and `depth` slots of `size` chunks each that the owner fills and its peers read.
//
// Set-up is collective and always agrees: every rank publishes its segment (or why it has none),
// maps every peer's and checks a random nonce (a pid can name another process in another pid
// namespace), then publishes whether that worked. One failure anywhere - ptrace rules that forbid
// opening another process's /proc/<pid>/fd, a disabled switch, no memfd - and no rank uses the
// segments; the group keeps to the fabric.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "comm/store/store.h"
#include "kernels/dtype.h"
#include "kernels/reduce.h"

namespace dsx::comm::ofi {

class HostSegments {
 public:
  // Progress counters: how many rounds (counted since the group was made) the owner has
  // posted into its slots, reduced, and consumed (copied out of its peers' slots); and how many
  // operations it has announced its buffer for (map_buffers).
  enum Counter { kPosted = 0, kReduced = 1, kConsumed = 2, kAnnounced = 3 };
  // Called now and then while a wait spins: drives the fabric, enforces the deadline, and
  // throws naming `peer` (a group rank) if it died - at once when `exited` (the segments saw
  // its process end). `what` says what the wait was for.
  using KeepAlive = std::function<void(int peer, const char* what, bool exited)>;

  struct Setup {
    std::unique_ptr<HostSegments> segments;  // null when the group keeps to the fabric
    std::string why_not;                     // then: the first reason any rank gave
  };
  // Collective over the group's ranks; `keys` is a store prefix unique to the group.
  // `enabled` false makes this rank (and so every rank) decline, saying `disabled_reason`.
  static Setup open(Store& store, const std::string& keys, int rank, int size, size_t chunk_bytes, bool enabled,
                    const std::string& disabled_reason, std::chrono::milliseconds timeout);
  ~HostSegments();
  HostSegments(const HostSegments&) = delete;
  HostSegments& operator=(const HostSegments&) = delete;

  int rank() const { return rank_; }
  int size() const { return static_cast<int>(bases_.size()); }
  size_t chunk_bytes() const { return chunk_bytes_; }
  int depth() const { return static_cast<int>(kDepth); }

  // The chunk-sized area for block `block` in the slot that round `round` uses, in `owner`'s segment.
  char* slot(int owner, uint64_t round, int block) const {
    return bases_[static_cast<size_t>(owner)] + kHeaderBytes +
           ((round % kDepth) * static_cast<size_t>(size()) + static_cast<size_t>(block)) * chunk_bytes_;
  }
  // Sets this rank's counter: everything written before it is visible to a reader that sees
  // the value. Wakes the peers that went to sleep waiting for it.
  void publish(Counter c, uint64_t value);
  // `peer`'s counter now (never waits).
  uint64_t progress(int peer, Counter c) const { return counter(peer, c).load(std::memory_order_acquire); }
  // Spins until `peer`'s counter reaches `at_least`; after a while sleeps on it (a futex), so
  // that on a host with more busy threads than cores a waiting rank leaves the core to the
  // rank it waits for.
  void wait(int peer, Counter c, uint64_t at_least, const KeepAlive& keep_alive, const char* what) const;
  // Before this rank writes round `round`'s slot: every peer has consumed the round that used it last.
  void wait_for_free_slot(uint64_t round, const KeepAlive& keep_alive) const {
    if (round < kDepth) return;
    for (int q = 0; q < size(); ++q) {
      if (q != rank_) wait(q, kConsumed, round - kDepth + 1, keep_alive, "to free a slot");
    }
  }

  // Rounds used so far: the next operation's rounds continue from here on every rank alike.
  uint64_t rounds_done = 0;
  // Operations that read the buffers in place (for tests and logs; read from other threads).
  std::atomic<uint64_t> in_place_operations{0};

  // Collective: every rank says where its buffer [data, data + bytes) of this operation lies and
  // waits for the others to say it. When every buffer is shared host memory (host_memory.h),
  // returns every rank's buffer as mapped here (peers' regions are mapped once and cached), so
  // the operation reads them in place; otherwise an empty vector, on every rank alike.
  std::vector<char*> map_buffers(void* data, size_t bytes, const KeepAlive& keep_alive);

 private:
  static constexpr uint64_t kDepth = 4;
  static constexpr size_t kHeaderBytes = 4096;
  struct alignas(64) Line {
    std::atomic<uint64_t> value;
  };
  // Where the owner's buffer of its latest announced operation lies (fd -1: not shared memory);
  // written before kAnnounced is published, read by peers after they see it.
  struct alignas(64) BufferPlace {
    int64_t fd;
    uint64_t id;  // the allocation's number in the owner's process
    uint64_t inode;
    uint64_t offset;
  };
  struct Header {
    Line counters[4];
    Line nonce;
    Line sleepers;  // peers asleep on one of this segment's counters
    BufferPlace buffer;
  };
  // A peer's allocation mapped here, by its number; the least recently used are unmapped.
  struct PeerRegion {
    uint64_t id;
    char* base;
    size_t bytes;
    uint64_t last_used;
  };
  static constexpr size_t kPeerRegionsKept = 8;
  char* peer_region(int peer, const BufferPlace& place);
  // Steps of open, each returning why it failed ("" when it did not): this rank's segment (a
  // memfd, `fd`, stamped with `nonce`), and peer `q`'s, from what it published
  // ("<pid> <fd> <nonce>"), mapped through /proc and checked by its nonce.
  std::string create_own(uint64_t nonce, int& fd);
  std::string map_peer(int q, const std::string& entry);
  HostSegments(int rank, size_t chunk_bytes) : rank_(rank), chunk_bytes_(chunk_bytes) {}
  Header& header(int owner) const { return *reinterpret_cast<Header*>(bases_[static_cast<size_t>(owner)]); }
  std::atomic<uint64_t>& counter(int owner, Counter c) const { return header(owner).counters[c].value; }
  size_t segment_bytes() const { return kHeaderBytes + kDepth * bases_.size() * chunk_bytes_; }

  // True once `peer`'s process has ended (its pidfd polls readable). A dead peer is seen here
  // at once, even when the store that would report it died with it (rank 0).
  bool peer_exited(int peer) const;

  int rank_;
  size_t chunk_bytes_;
  std::vector<char*> bases_;  // every rank's segment, mapped here (this rank's own included)
  std::vector<int> pidfds_;   // every peer's process (-1: this rank, or a kernel without pidfd_open)
  std::vector<long> pids_;    // every peer's pid, for /proc/<pid>/fd (0: this rank)
  std::vector<std::vector<PeerRegion>> peer_regions_;
  uint64_t announced_ = 0;    // operations announced so far (map_buffers)
};

// Allreduce through the segments: block b of the buffer belongs to rank b. Round by round, each
// rank posts its chunk of every other rank's block into its own slot, reduces its own block
// with its peers' posted chunks (in its buffer, and into its slot), then copies every peer's
// reduced chunk out of that peer's slot. Each element is reduced once, by its owner, so every
// rank ends with identical bytes. Every rank moves 2(p-1)/p of the buffer through shared
// memory and nothing through the kernel. Buffers of at most `one_shot_bytes` (that fit a slot)
// take one step instead: every rank posts all of its buffer and adds up everyone's.
// Buffers of at least `in_place_bytes` whose every rank's copy is shared host memory
// (host_memory.h) are read in place: each rank sums its block from every buffer and writes the
// sum back into every buffer - no slots.
void host_allreduce(HostSegments& seg, const HostSegments::KeepAlive& keep_alive, void* data, size_t count,
                    kernels::DType dtype, kernels::ReduceOp op, size_t one_shot_bytes, size_t in_place_bytes);
// The one-step allreduce of small buffers (at most `one_shot_bytes`, one_shot_fits) in pieces,
// so that the caller's thread can try it without ever waiting (ProgressEngine::
// attempt_then_submit): while one_shot_slot_free, post this rank's buffer; if
// one_shot_peers_posted within a few microseconds, finish at once; otherwise the worker
// finishes it (one_shot_finish waits for the peers, with the operation's deadline).
bool one_shot_fits(const HostSegments& seg, size_t bytes, size_t one_shot_bytes);
bool one_shot_slot_free(const HostSegments& seg);
void one_shot_post(HostSegments& seg, const void* data, size_t bytes);
bool one_shot_peers_posted(const HostSegments& seg, std::chrono::microseconds budget);
void one_shot_finish(HostSegments& seg, const HostSegments::KeepAlive& keep_alive, void* data, size_t count,
                     kernels::DType dtype, kernels::ReduceOp op);

// Reduce-scatter (input: size() blocks of `count`; rank r's output: block r reduced) and
// allgather (`bytes` from every rank, in rank order) through the segments, in rounds the same way;
// from the peers' inputs in place when every rank's input is shared host memory and the whole
// operation moves at least `in_place_bytes`.
void host_reduce_scatter(HostSegments& seg, const HostSegments::KeepAlive& keep_alive, const void* input, void* output,
                         size_t count, kernels::DType dtype, kernels::ReduceOp op, size_t in_place_bytes);
void host_allgather(HostSegments& seg, const HostSegments::KeepAlive& keep_alive, const void* input, void* output,
                    size_t bytes, size_t in_place_bytes);

}  // namespace dsx::comm::ofi
