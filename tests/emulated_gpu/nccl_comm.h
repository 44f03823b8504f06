// One rank's communicator in the emulated NCCL (what the C API in nccl.cpp and nccl_comm.cpp
// works on) and the stream work of its operations, which nccl_ops.cpp runs over the segment.
#pragma once

#include <nccl.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "tests/emulated_gpu/nccl_shm.h"

namespace dsx::emu::nccl {

enum class Kind : int32_t { AllReduce, Reduce, ReduceScatter, AllGather, Broadcast };
const char* kind_name(Kind kind);

struct Collective {
  Kind kind;
  const void* in;
  void* out;
  size_t count;  // per rank for ReduceScatter (received) and AllGather (sent)
  ncclDataType_t type;
  ncclRedOp_t op;
  int root;
};

struct PointToPoint {
  bool send;
  void* buffer;
  size_t bytes;
  int peer;
  uint64_t seq = 0;  // this message's number on its channel, from 1
};

struct Comm {
  Segment segment;
  int rank = 0, nranks = 0, device = 0;
  bool blocking = true;
  std::chrono::duration<double> timeout{60.0};
  std::atomic<bool> aborted{false};
  std::atomic<int> outstanding{0};  // enqueued and not finished
  std::atomic<int> running{0};      // on a stream worker now
  std::atomic<bool> finalizing{false};

  // Operations run one at a time in the order issued, whatever stream each went to, as NCCL's
  // do: every rank then meets the same sequence of barriers.
  std::mutex mutex;
  std::condition_variable turn_changed;
  uint64_t issued = 0, turn = 0;
  std::vector<uint64_t> sent, received;  // messages issued per peer
  uint64_t phase = 0;  // barriers passed (only the op whose turn it is touches it)

  // The first asynchronous error; later ones follow from it.
  ncclResult_t error = ncclSuccess;
  std::string message;

  void fail(ncclResult_t result, const std::string& why);
  ncclResult_t failed();
  uint64_t take_ticket();
  bool wait_turn(uint64_t ticket, const char* what);
  void end_turn(uint64_t ticket);
};

// The stream work of one collective, or of one group's sends and receives, in its turn. A
// failure becomes the communicator's asynchronous error; the stream goes on.
void run_collective(Comm& c, const Collective& op);
void run_point_to_point(Comm& c, const std::vector<PointToPoint>& ops);

// Says why `call` is refused, remembers it as this thread's last error (ncclGetLastError) and
// returns `result`.
ncclResult_t refuse(ncclResult_t result, const std::string& call, const std::string& why);

}  // namespace dsx::emu::nccl

// What ncclComm_t points to: work still queued keeps the state alive after destroy or abort.
struct ncclComm {
  std::shared_ptr<dsx::emu::nccl::Comm> c;
};
