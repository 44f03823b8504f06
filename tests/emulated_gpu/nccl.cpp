// The NCCL calls that enqueue work, on the emulated GPU: collectives, sends and receives, and
// the groups that gather them. Each call is checked first, as NCCL (or the GPU) would refuse it:
// a stream of another device, a buffer that is not device memory of the communicator's GPU or is
// too small. Then it becomes stream work (nccl_ops.cpp), run in the communicator's issue order.
#include <nccl.h>

#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "tests/emulated_gpu/nccl_comm.h"
#include "tests/emulated_gpu/nccl_reduce.h"
#include "tests/emulated_gpu/runtime.h"

using namespace dsx::emu;
using namespace dsx::emu::nccl;

namespace {

// NCCL works on its communicator's device whatever is current (stream 0 means that device's).
struct OnDevice {
  int previous;
  explicit OnDevice(int device) : previous(current_device()) { set_current_device(device); }
  ~OnDevice() { set_current_device(previous); }
};

// A call's communicator, stream and buffers, checked before anything is enqueued.
ncclResult_t check_call(ncclComm_t comm, cudaStream_t stream, const char* call,
                        std::initializer_list<std::pair<const void*, size_t>> buffers) {
  if (!comm || !comm->c) return refuse(ncclInvalidArgument, call, "a null communicator");
  Comm& c = *comm->c;
  if (ncclResult_t e = c.failed()) return e;
  int device;
  {
    OnDevice on(c.device);
    device = stream_device(stream);
  }
  if (device < 0) return refuse(ncclInvalidArgument, call, "the stream is not a live CUDA stream");
  if (device != c.device)
    return refuse(ncclInvalidArgument, call,
                  "a stream of device " + std::to_string(device) +
                      " given to a communicator of device " + std::to_string(c.device) +
                      ": NCCL runs on the communicator's device");
  for (auto [p, bytes] : buffers) {
    if (bytes == 0) continue;
    std::string why;
    if (!check_range(p, bytes, MemoryKind::Device, &why))
      return refuse(ncclInvalidArgument, call,
                    "a buffer of " + std::to_string(bytes) + " bytes: " + why);
    const int on = locate(p).device;
    if (on != c.device)
      return refuse(ncclInvalidArgument, call,
                    "a buffer on device " + std::to_string(on) +
                        " given to a communicator of device " + std::to_string(c.device));
  }
  return ncclSuccess;
}

// Enqueues `run` on `stream` in its turn among the communicator's operations.
// `touches`: the buffers it reads and writes, for the stream-order check.
ncclResult_t enqueue_op(const std::shared_ptr<Comm>& c, cudaStream_t stream, const char* what,
                        std::function<void(Comm&)> run, const std::vector<Touch>& touches) {
  const uint64_t ticket = c->take_ticket();
  c->outstanding.fetch_add(1);
  cudaError_t e;
  {
    OnDevice on(c->device);
    e = enqueue(stream, what, [c, ticket, what, run = std::move(run)]() -> std::string {
      c->running.fetch_add(1);
      if (c->wait_turn(ticket, what)) run(*c);
      c->end_turn(ticket);
      c->running.fetch_sub(1);
      c->outstanding.fetch_sub(1);
      return {};  // NCCL's failures are the communicator's, not the device's
    }, touches);
  }
  if (e == cudaSuccess) return ncclSuccess;
  c->end_turn(ticket);
  c->outstanding.fetch_sub(1);
  return refuse(ncclUnhandledCudaError, what,
                std::string("enqueueing failed: ") + cudaGetErrorName(e));
}

// Calls between ncclGroupStart and ncclGroupEnd, per thread: collectives go out at the end in
// order, then each communicator's sends and receives on one stream as one piece of work.
struct Pending {
  std::shared_ptr<Comm> c;
  cudaStream_t stream;
  bool p2p;
  Collective collective;
  PointToPoint transfer;
  std::vector<Touch> touches;
};
struct Group {
  int depth = 0;
  ncclResult_t error = ncclSuccess;
  std::vector<Pending> ops;
};
thread_local Group t_group;

ncclResult_t issue_p2p(const std::shared_ptr<Comm>& c, cudaStream_t stream,
                       std::vector<PointToPoint> ops) {
  std::vector<Touch> touches;
  for (const PointToPoint& p : ops) touches.push_back({p.buffer, p.bytes, !p.send});
  {
    std::lock_guard lock(c->mutex);
    for (PointToPoint& p : ops) p.seq = ++(p.send ? c->sent : c->received)[size_t(p.peer)];
  }
  return enqueue_op(
      c, stream,
      ops.size() == 1 ? (ops[0].send ? "ncclSend" : "ncclRecv") : "ncclGroupEnd (send/recv)",
      [ops = std::move(ops)](Comm& comm) { run_point_to_point(comm, ops); }, touches);
}

ncclResult_t issue(Pending op) {
  if (t_group.depth > 0) {
    t_group.ops.push_back(std::move(op));
    return ncclSuccess;
  }
  if (op.p2p) return issue_p2p(op.c, op.stream, {op.transfer});
  const Collective coll = op.collective;
  return enqueue_op(op.c, op.stream, kind_name(coll.kind),
                    [coll](Comm& c) { run_collective(c, coll); }, op.touches);
}

ncclResult_t checked_collective(Kind kind, const void* in, void* out, size_t count,
                                ncclDataType_t type, ncclRedOp_t op, int root, ncclComm_t comm,
                                cudaStream_t stream) {
  const char* call = kind_name(kind);
  const size_t es = element_size(type);
  if (es == 0)
    return refuse(ncclInvalidArgument, call, std::string(type_name(type)) + " is not emulated");
  const bool reduces =
      kind == Kind::AllReduce || kind == Kind::Reduce || kind == Kind::ReduceScatter;
  if (reduces && !known_op(op))
    return refuse(ncclInvalidArgument, call,
                  "ncclRedOp_t " + std::to_string(int(op)) + " is not emulated");
  if (!comm || !comm->c) return refuse(ncclInvalidArgument, call, "a null communicator");
  const Comm& c = *comm->c;
  if ((kind == Kind::Broadcast || kind == Kind::Reduce) && (root < 0 || root >= c.nranks))
    return refuse(ncclInvalidArgument, call,
                  "root " + std::to_string(root) + " is not a rank of the communicator");
  const size_t n = size_t(c.nranks), bytes = count * es;
  const bool root_only = kind == Kind::Reduce || kind == Kind::Broadcast;
  const size_t in_bytes = kind == Kind::ReduceScatter                   ? bytes * n
                          : (kind == Kind::Broadcast && c.rank != root) ? 0
                                                                        : bytes;
  const size_t out_bytes = kind == Kind::AllGather                                 ? bytes * n
                           : (root_only && kind == Kind::Reduce && c.rank != root) ? 0
                                                                                   : bytes;
  if (ncclResult_t e = check_call(comm, stream, call, {{in, in_bytes}, {out, out_bytes}})) return e;
  if (count == 0) return ncclSuccess;
  return issue({comm->c, stream, false, {kind, in, out, count, type, op, root}, {},
                {{in, in_bytes, false}, {out, out_bytes, true}}});
}

ncclResult_t checked_point_to_point(bool send, void* buffer, size_t count, ncclDataType_t type,
                                    int peer, ncclComm_t comm, cudaStream_t stream) {
  const char* call = send ? "ncclSend" : "ncclRecv";
  const size_t es = element_size(type);
  if (es == 0)
    return refuse(ncclInvalidArgument, call, std::string(type_name(type)) + " is not emulated");
  if (!comm || !comm->c) return refuse(ncclInvalidArgument, call, "a null communicator");
  if (peer < 0 || peer >= comm->c->nranks)
    return refuse(ncclInvalidArgument, call,
                  "peer " + std::to_string(peer) + " is not a rank of the communicator");
  if (ncclResult_t e = check_call(comm, stream, call, {{buffer, count * es}})) return e;
  return issue({comm->c, stream, true, {}, {send, buffer, count * es, peer}, {}});
}

// A call refused inside a group fails the whole group at ncclGroupEnd, as on NCCL.
ncclResult_t in_group(ncclResult_t result) {
  if (result != ncclSuccess && t_group.depth > 0 && t_group.error == ncclSuccess)
    t_group.error = result;
  return result;
}

ncclResult_t collective(Kind kind, const void* in, void* out, size_t count, ncclDataType_t type,
                        ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream) {
  return in_group(checked_collective(kind, in, out, count, type, op, root, comm, stream));
}

ncclResult_t point_to_point(bool send, void* buffer, size_t count, ncclDataType_t type, int peer,
                            ncclComm_t comm, cudaStream_t stream) {
  return in_group(checked_point_to_point(send, buffer, count, type, peer, comm, stream));
}

}  // namespace

extern "C" {

ncclResult_t ncclGroupStart() {
  ++t_group.depth;
  return ncclSuccess;
}

ncclResult_t ncclGroupEnd() {
  if (t_group.depth == 0)
    return refuse(ncclInvalidUsage, "ncclGroupEnd", "no ncclGroupStart before it");
  if (--t_group.depth > 0) return ncclSuccess;
  std::vector<Pending> ops = std::move(t_group.ops);
  t_group.ops.clear();
  if (ncclResult_t refused = std::exchange(t_group.error, ncclSuccess))
    return refused;  // nothing goes out
  ncclResult_t result = ncclSuccess;
  std::vector<std::pair<std::pair<Comm*, cudaStream_t>, std::vector<PointToPoint>>> batches;
  std::map<std::pair<Comm*, cudaStream_t>, std::shared_ptr<Comm>> owners;
  for (Pending& op : ops) {
    if (!op.p2p) {
      if (ncclResult_t e = issue(op); e && !result) result = e;
      continue;
    }
    const auto key = std::make_pair(op.c.get(), op.stream);
    owners[key] = op.c;
    auto it = std::find_if(batches.begin(), batches.end(), [&](auto& b) { return b.first == key; });
    if (it == batches.end()) it = batches.insert(batches.end(), {key, {}});
    it->second.push_back(op.transfer);
  }
  for (auto& [key, transfers] : batches)
    if (ncclResult_t e = issue_p2p(owners[key], key.second, std::move(transfers)); e && !result)
      result = e;
  return result;
}

ncclResult_t ncclAllReduce(const void* in, void* out, size_t count, ncclDataType_t type,
                           ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  return collective(Kind::AllReduce, in, out, count, type, op, 0, comm, stream);
}

ncclResult_t ncclReduce(const void* in, void* out, size_t count, ncclDataType_t type,
                        ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream) {
  return collective(Kind::Reduce, in, out, count, type, op, root, comm, stream);
}

ncclResult_t ncclReduceScatter(const void* in, void* out, size_t count, ncclDataType_t type,
                               ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  return collective(Kind::ReduceScatter, in, out, count, type, op, 0, comm, stream);
}

ncclResult_t ncclAllGather(const void* in, void* out, size_t count, ncclDataType_t type,
                           ncclComm_t comm, cudaStream_t stream) {
  return collective(Kind::AllGather, in, out, count, type, ncclSum, 0, comm, stream);
}

ncclResult_t ncclBroadcast(const void* in, void* out, size_t count, ncclDataType_t type, int root,
                           ncclComm_t comm, cudaStream_t stream) {
  return collective(Kind::Broadcast, in, out, count, type, ncclSum, root, comm, stream);
}

ncclResult_t ncclBcast(void* buffer, size_t count, ncclDataType_t type, int root, ncclComm_t comm,
                       cudaStream_t stream) {
  return collective(Kind::Broadcast, buffer, buffer, count, type, ncclSum, root, comm, stream);
}

ncclResult_t ncclSend(const void* buffer, size_t count, ncclDataType_t type, int peer,
                      ncclComm_t comm, cudaStream_t stream) {
  return point_to_point(true, const_cast<void*>(buffer), count, type, peer, comm, stream);
}

ncclResult_t ncclRecv(void* buffer, size_t count, ncclDataType_t type, int peer, ncclComm_t comm,
                      cudaStream_t stream) {
  return point_to_point(false, buffer, count, type, peer, comm, stream);
}

}  // extern "C"
