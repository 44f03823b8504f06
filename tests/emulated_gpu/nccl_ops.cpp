// The emulated NCCL's operations as they run on a stream: collectives stage each rank's part in
// its slot, meet at a barrier, take what they need from every slot, and meet again before the
// slots are reused; sends and receives stream through the pair's ring.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <functional>

#include "tests/emulated_gpu/nccl_comm.h"
#include "tests/emulated_gpu/nccl_reduce.h"
#include "tests/emulated_gpu/runtime.h"

namespace dsx::emu::nccl {

const char* kind_name(Kind kind) {
  switch (kind) {
    case Kind::AllReduce:
      return "ncclAllReduce";
    case Kind::Reduce:
      return "ncclReduce";
    case Kind::ReduceScatter:
      return "ncclReduceScatter";
    case Kind::AllGather:
      return "ncclAllGather";
    case Kind::Broadcast:
      return "ncclBroadcast";
  }
  return "?";
}

void Comm::fail(ncclResult_t result, const std::string& why) {
  {
    std::lock_guard lock(mutex);
    if (error != ncclSuccess) return;
    error = result;
    message = why;
  }
  turn_changed.notify_all();
  if (!aborted.load()) say("NCCL rank " + std::to_string(rank) + ": " + why);
}

ncclResult_t Comm::failed() {
  std::lock_guard lock(mutex);
  return error;
}

uint64_t Comm::take_ticket() {
  std::lock_guard lock(mutex);
  return issued++;
}

bool Comm::wait_turn(uint64_t ticket, const char* what) {
  std::unique_lock lock(mutex);
  const bool ok = turn_changed.wait_for(
      lock, timeout, [&] { return turn >= ticket || error != ncclSuccess || aborted.load(); });
  if (error != ncclSuccess || aborted.load()) return false;
  if (ok) return true;
  lock.unlock();
  fail(ncclSystemError, std::string(what) + " waited " + std::to_string(int(timeout.count())) +
                            " s for this communicator's earlier operation, on another stream, to "
                            "run: NCCL runs a communicator's operations in the order issued");
  return false;
}

void Comm::end_turn(uint64_t ticket) {
  {
    std::lock_guard lock(mutex);
    turn = std::max(turn, ticket + 1);
  }
  turn_changed.notify_all();
}

namespace {

std::string seconds(const Comm& c) {
  char text[32];
  std::snprintf(text, sizeof text, "%g s", c.timeout.count());
  return text;
}

// Turns how a wait ended into the communicator's error; true when it ended well.
bool waited(Comm& c, const WaitEnd& end, const std::string& what, const std::string& waiting_for,
            const std::string& hint) {
  switch (end.kind) {
    case WaitEnd::kReady:
      return true;
    case WaitEnd::kAborted:
      c.fail(ncclSystemError, what + ": the communicator was aborted");
      break;
    case WaitEnd::kTimeout:
      c.fail(ncclSystemError, what + " waited " + seconds(c) + " for " + waiting_for +
                                  (hint.empty() ? "" : ": " + hint));
      break;
    case WaitEnd::kPeerGone:
      c.fail(ncclRemoteError, what + " waiting for " + waiting_for + ": " + end.reason);
      break;
  }
  return false;
}

bool barrier(Comm& c, const std::string& what) {
  const uint64_t phase = ++c.phase;
  c.segment.rank(c.rank).arrived.store(phase, std::memory_order_release);
  c.segment.ring_doorbell();
  int late = -1;
  WaitEnd end = c.segment.wait(
      [&] {
        for (int r = 0; r < c.nranks; ++r)
          if (c.segment.rank(r).arrived.load(std::memory_order_acquire) < phase) return late = r;
        return -1;
      },
      c.aborted, c.timeout);
  return waited(c, end, what, "rank " + std::to_string(late) + " to join it",
                "every rank must issue the same collectives in the same order");
}

std::string describe(const OpInfo& info) {
  std::string s = std::string(kind_name(Kind(info.kind))) + " of " + std::to_string(info.count) +
                  " " + type_name(ncclDataType_t(info.dtype));
  if (Kind(info.kind) == Kind::Broadcast || Kind(info.kind) == Kind::Reduce)
    s += " rooted at rank " + std::to_string(info.root);
  if (Kind(info.kind) != Kind::Broadcast && Kind(info.kind) != Kind::AllGather)
    s += std::string(" with ") + op_name(ncclRedOp_t(info.op));
  return s;
}

// After the first barrier every rank sees every rank's call: they must agree.
bool same_everywhere(Comm& c, const OpInfo& mine) {
  for (int r = 0; r < c.nranks; ++r) {
    const OpInfo& theirs = c.segment.rank(r).op;
    if (std::memcmp(&theirs, &mine, sizeof mine) == 0) continue;
    c.fail(ncclInvalidUsage, describe(mine) + " on rank " + std::to_string(c.rank) + " met " +
                                 describe(theirs) + " on rank " + std::to_string(r) +
                                 ": every rank must issue the same collectives in the same order");
    return false;
  }
  return true;
}

}  // namespace

void run_collective(Comm& c, const Collective& op) {
  const size_t es = element_size(op.type), n = size_t(c.nranks), me = size_t(c.rank);
  const auto* in = static_cast<const std::byte*>(op.in);
  auto* out = static_cast<std::byte*>(op.out);
  const size_t per = op.kind == Kind::ReduceScatter ? kSlotBytes / (es * n) : kSlotBytes / es;
  OpInfo info{};  // zeroed padding: compared bytewise
  info.kind = int32_t(op.kind), info.dtype = op.type, info.op = op.op, info.root = op.root;
  info.count = op.count;
  if (op.kind == Kind::AllGather || op.kind == Kind::Broadcast) info.op = 0;
  if (op.kind != Kind::Broadcast && op.kind != Kind::Reduce) info.root = 0;
  c.segment.rank(c.rank).op = info;
  const std::string what = describe(info);
  std::vector<const void*> inputs(n);
  for (size_t lo = 0; lo < op.count; lo += per) {
    const size_t k = std::min(per, op.count - lo), bytes = k * es;
    std::byte* mine = c.segment.slot(c.rank);
    switch (op.kind) {  // this rank's part into its slot
      case Kind::ReduceScatter:
        for (size_t r = 0; r < n; ++r)
          std::memcpy(mine + r * bytes, in + (r * op.count + lo) * es, bytes);
        break;
      case Kind::Broadcast:
        if (int(me) == op.root) std::memcpy(mine, in + lo * es, bytes);
        break;
      default:
        std::memcpy(mine, in + lo * es, bytes);
        break;
    }
    if (!barrier(c, what)) return;
    if (lo == 0 && !same_everywhere(c, info)) return;
    switch (op.kind) {  // what this rank takes from all slots
      case Kind::AllReduce:
      case Kind::Reduce:
        if (op.kind == Kind::Reduce && int(me) != op.root) break;
        for (size_t r = 0; r < n; ++r) inputs[r] = c.segment.slot(int(r));
        reduce(op.type, op.op, inputs.data(), int(n), out + lo * es, k);
        break;
      case Kind::ReduceScatter:
        for (size_t r = 0; r < n; ++r) inputs[r] = c.segment.slot(int(r)) + me * bytes;
        reduce(op.type, op.op, inputs.data(), int(n), out + lo * es, k);
        break;
      case Kind::AllGather:
        for (size_t r = 0; r < n; ++r)
          std::memmove(out + (r * op.count + lo) * es, c.segment.slot(int(r)), bytes);
        break;
      case Kind::Broadcast:
        std::memcpy(out + lo * es, c.segment.slot(op.root), bytes);
        break;
    }
    if (!barrier(c, what)) return;  // nobody refills a slot another rank still reads
  }
}

namespace {

// One send or receive in progress. A send waits for its receive to start (NCCL's send does not
// complete before the peer takes the data), then streams through the ring; it ends when all of
// it was taken.
struct Transfer {
  PointToPoint p;
  Channel* ch;
  std::byte* ring;
  int stage = 0;  // send: 0 await recv, 1 write, 2 await taken, 3 done; recv: 0 post, 1 await send,
                  // 2 read, 3 done
  size_t done = 0;
  uint64_t end = 0;  // send: the ring position after the message

  bool ready() const {
    const uint64_t head = ch->head.load(std::memory_order_acquire),
                   tail = ch->tail.load(std::memory_order_acquire);
    if (ch->broken.load()) return true;
    if (p.send) {
      if (stage == 0) return ch->posted.load(std::memory_order_acquire) >= p.seq;
      if (stage == 1) return head - tail < kRingBytes;
      return tail >= end;
    }
    if (stage == 0) return true;
    if (stage == 1) return ch->offered.load(std::memory_order_acquire) >= p.seq;
    return head > tail;
  }
  std::string label() const {
    return p.send ? "ncclSend to rank " + std::to_string(p.peer)
                  : "ncclRecv from rank " + std::to_string(p.peer);
  }
  std::string awaited() const {
    if (stage == 0 || (!p.send && stage == 1))
      return p.send ? "a matching ncclRecv" : "a matching ncclSend";
    return p.send ? "rank " + std::to_string(p.peer) + " to take the data"
                  : "rank " + std::to_string(p.peer) + "'s data";
  }
};

// Moves `t` on as far as it can now: 1 when it did, 0 when it must wait, -1 on failure.
int step(Comm& c, Transfer& t) {
  Channel& ch = *t.ch;
  if (ch.broken.load()) {
    c.fail(ncclInvalidUsage, t.label() + ": the sizes of a send and its matching receive differ (" +
                                 std::to_string(t.p.bytes) + " bytes here)");
    return -1;
  }
  if (!t.ready()) return 0;
  const uint64_t head = ch.head.load(std::memory_order_acquire),
                 tail = ch.tail.load(std::memory_order_acquire);
  if (t.p.send && t.stage == 0) {
    t.end = head + t.p.bytes;
    ch.offered_bytes.store(t.p.bytes, std::memory_order_relaxed);
    ch.offered.store(t.p.seq, std::memory_order_release);
    t.stage = t.p.bytes ? 1 : 2;
  } else if (t.p.send && t.stage == 1) {
    const size_t at = size_t(head % kRingBytes);
    const size_t w =
        std::min({kRingBytes - size_t(head - tail), t.p.bytes - t.done, kRingBytes - at});
    std::memcpy(t.ring + at, static_cast<const std::byte*>(t.p.buffer) + t.done, w);
    t.done += w;
    ch.head.store(head + w, std::memory_order_release);
    if (t.done == t.p.bytes) t.stage = 2;
  } else if (t.p.send) {
    t.stage = 3;
  } else if (t.stage == 0) {
    ch.posted.store(t.p.seq, std::memory_order_release);
    t.stage = 1;
  } else if (t.stage == 1) {
    const uint64_t bytes = ch.offered_bytes.load(std::memory_order_relaxed);
    if (bytes != t.p.bytes) {
      ch.broken.store(1);
      c.segment.ring_doorbell();
      c.fail(ncclInvalidUsage, t.label() + " of " + std::to_string(t.p.bytes) +
                                   " bytes met an ncclSend of " + std::to_string(bytes) +
                                   " bytes: a send and its receive must match");
      return -1;
    }
    t.stage = bytes ? 2 : 3;
  } else {
    const size_t at = size_t(tail % kRingBytes);
    const size_t r = std::min({size_t(head - tail), t.p.bytes - t.done, kRingBytes - at});
    std::memcpy(static_cast<std::byte*>(t.p.buffer) + t.done, t.ring + at, r);
    t.done += r;
    ch.tail.store(tail + r, std::memory_order_release);
    if (t.done == t.p.bytes) t.stage = 3;
  }
  c.segment.ring_doorbell();
  return 1;
}

}  // namespace

void run_point_to_point(Comm& c, const std::vector<PointToPoint>& ops) {
  std::vector<Transfer> all;
  for (const PointToPoint& p : ops) {
    const int from = p.send ? c.rank : p.peer, to = p.send ? p.peer : c.rank;
    all.push_back({p, &c.segment.channel(from, to), c.segment.ring(from, to)});
  }
  // Within a group every transfer progresses at once, except that those on one channel go in
  // the order issued (NCCL keeps the order of sends, and of receives, to one peer).
  auto live = [&](size_t i) {
    if (all[i].stage == 3) return false;
    for (size_t j = 0; j < i; ++j)
      if (all[j].stage != 3 && all[j].ch == all[i].ch && all[j].p.send == all[i].p.send)
        return false;
    return true;
  };
  for (;;) {
    bool moved = false, finished = true;
    for (size_t i = 0; i < all.size(); ++i) {
      if (!live(i)) {
        finished = finished && all[i].stage == 3;
        continue;
      }
      finished = false;
      const int s = step(c, all[i]);
      if (s < 0) return;
      moved = moved || s > 0;
    }
    if (finished) return;
    if (moved) continue;
    size_t first = all.size();
    WaitEnd end = c.segment.wait(
        [&] {
          first = all.size();
          for (size_t i = 0; i < all.size(); ++i) {
            if (!live(i)) continue;
            if (all[i].ready()) return -1;
            if (first == all.size()) first = i;
          }
          return first == all.size() ? -1 : all[first].p.peer;
        },
        c.aborted, c.timeout);
    if (end.kind == WaitEnd::kReady) continue;
    const Transfer& t = all[first < all.size() ? first : 0];
    const bool unmatched = t.p.send && t.stage == 0;
    waited(c, end, t.label(), t.awaited(),
           unmatched ? "send/recv pairs between ranks must be inside ncclGroupStart/End" : "");
    return;
  }
}

}  // namespace dsx::emu::nccl
