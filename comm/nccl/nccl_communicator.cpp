// The nccl backend (see nccl_communicator.h).
#include "comm/nccl/nccl_communicator.h"

#include <algorithm>
#include <cstring>
#include <set>
#include <sstream>

#include "device/cuda_device.h"
#include "dsx/join.h"

namespace dsx::comm::nccl {

namespace {

constexpr auto kWatchInterval = std::chrono::milliseconds(2);
constexpr auto kStoreInterval = std::chrono::milliseconds(500);

ncclDataType_t nccl_type(DType t) {
  return t == DType::F32 ? ncclFloat32 : t == DType::F16 ? ncclFloat16 : ncclBfloat16;
}

ncclRedOp_t nccl_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return ncclSum;
    case ReduceOp::Avg: return ncclAvg;
    case ReduceOp::Max: return ncclMax;
    case ReduceOp::Min: return ncclMin;
  }
  return ncclSum;
}

std::string elements(size_t count, DType dtype) {
  return std::string(kernels::dtype_name(dtype)) + ", " + std::to_string(count) + " elements";
}

}  // namespace

std::unique_ptr<Communicator> create_nccl_world(Rendezvous& rv, const CommOptions& options) {
  std::vector<int> members(static_cast<size_t>(rv.world_size()));
  for (int r = 0; r < rv.world_size(); ++r) members[static_cast<size_t>(r)] = r;
  return std::make_unique<NcclCommunicator>(rv.store(), std::move(members), rv.rank(), rv.local_rank(), "nccl/world/uid",
                                            options);
}

NcclCommunicator::NcclCommunicator(Store& store, std::vector<int> members, int world_rank, int local_rank,
                                   std::string key, const CommOptions& options)
    : store_(store),
      members_(std::move(members)),
      world_rank_(world_rank),
      local_rank_(local_rank),
      key_(std::move(key)),
      options_(options) {
  for (size_t i = 0; i < members_.size(); ++i) {
    if (members_[i] == world_rank_) rank_ = static_cast<int>(i);
  }
  // First: NCCL binds the communicator to it. Never shared: NCCL refuses two ranks on one GPU.
  device::use_rank_device(local_rank_, false);
  gpu_ = device::make_cuda_device();
  if (ncclResult_t r = ncclGetVersion(&nccl_version_); r != ncclSuccess) {
    throw Error(ErrorKind::Comm, std::string("nccl backend: ncclGetVersion failed: ") + ncclGetErrorString(r));
  }

  // The id travels through the store: group rank 0 draws it, the others read it.
  ncclUniqueId id;
  if (rank_ == 0) {
    if (ncclResult_t r = ncclGetUniqueId(&id); r != ncclSuccess) {
      throw Error(ErrorKind::Comm, std::string("nccl backend: ncclGetUniqueId failed: ") + ncclGetErrorString(r));
    }
    store_.set(key_, std::string(id.internal, sizeof(id.internal)));
  } else {
    std::string bytes = get_from_peers(store_, key_, store_timeout_from_environment());
    std::memcpy(id.internal, bytes.data(), std::min(bytes.size(), sizeof(id.internal)));
  }

  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;  // every NCCL call returns at once; we poll its state with a deadline
  {
    std::lock_guard lock(mutex_);
    settle(ncclCommInitRankConfig(&comm_, size(), id, rank_, &config), "ncclCommInitRankConfig");
  }
  stream_ = gpu_->create_stream("nccl");
  legacy_stream_ = gpu_->adopt_stream(cudaStreamLegacy, "the legacy default stream");
  caller_stream_ = legacy_stream_.get();
  ready_ = gpu_->create_event();
  barrier_word_ = static_cast<float*>(gpu_->allocate_now(sizeof(float)));
  watchdog_store_ = store_.helper();
  lifeline_->comm = this;
  watchdog_ = std::thread([this] { watch(); });
}

NcclCommunicator::~NcclCommunicator() {
  {
    std::lock_guard lock(lifeline_->mutex);  // Works outliving us no longer reach in
    lifeline_->comm = nullptr;
  }
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  watchdog_.join();
  std::lock_guard lock(mutex_);
  try {
    gpu_->make_current();  // the destructor may run on any thread
  } catch (const Error&) {
    // Closing goes on: NCCL's own calls below report what is wrong.
  }
  if (comm_) {
    // Work nobody waited for still runs (a peer may be waiting on it), then completes or fails.
    issue_held_locked();
    drain_locked();
  }
  if (comm_) {
    ncclCommFinalize(comm_);  // flushes; non-blocking: poll, but never past the deadline
    ncclResult_t state = ncclInProgress;
    auto deadline = Clock::now() + options_.timeout;
    while (state == ncclInProgress && Clock::now() < deadline) ncclCommGetAsyncError(comm_, &state);
    if (state == ncclSuccess) {
      ncclCommDestroy(comm_);
    } else {
      ncclCommAbort(comm_);
    }
  }
  // A safety net: issue_held_locked, drain_locked and abort_locked leave nothing behind.
  for (auto& p : held_) {
    p.work->fail(Error(ErrorKind::Comm, p.work->description() + " was not run: the communicator was closed"));
  }
  for (auto& p : pending_) {
    p.work->fail(Error(ErrorKind::Comm, p.work->description() + " was not completed: the communicator was closed"));
  }
  pending_.clear();
  try {
    for (auto& block : pinned_) gpu_->free_pinned(block->data);
    gpu_->free_now(barrier_word_);
  } catch (const Error&) {
    // A GPU already failed keeps its memory until the process ends.
  }
}

void NcclCommunicator::use_device() { gpu_->make_current(); }

void NcclCommunicator::after_caller_locked() {
  caller_stream_->record(*ready_);
  stream_->wait(*ready_);
}

void NcclCommunicator::track_locked(WorkHandle work, std::function<void()> on_done) {
  auto done = gpu_->create_event();
  stream_->record(*done);
  pending_.push_back({std::move(work), std::move(done), Clock::now() + options_.timeout, std::move(on_done)});
}

// Whether an operation's completion event fired; a failed GPU reads as never (the watchdog then
// aborts at the deadline, naming the operation).
bool NcclCommunicator::finished_locked(device::Event& done) {
  try {
    return gpu_->query(done);
  } catch (const Error&) {
    return false;
  }
}

void NcclCommunicator::complete_finished_locked() {
  // One stream, so events fire in issue order.
  while (!pending_.empty() && finished_locked(*pending_.front().done)) {
    Pending p = std::move(pending_.front());
    pending_.pop_front();
    if (p.on_done) p.on_done();
    p.work->complete();
  }
}

NcclCommunicator::PinnedBlock& NcclCommunicator::pinned_block_locked(size_t bytes) {
  for (auto& block : pinned_) {
    if (!block->busy && block->bytes >= bytes) {
      block->busy = true;
      return *block;
    }
  }
  auto block = std::make_unique<PinnedBlock>();
  block->data = gpu_->allocate_pinned(bytes);  // staging a host buffer
  block->bytes = bytes;
  block->busy = true;
  pinned_.push_back(std::move(block));
  return *pinned_.back();
}

void NcclCommunicator::drain_locked() {
  const auto deadline = Clock::now() + options_.timeout;
  while (!pending_.empty() && broken_.empty()) {
    complete_finished_locked();
    if (pending_.empty()) break;
    if (Clock::now() > deadline) {
      abort_locked(pending_.front().work->description() + " was still running when the communicator was closed and " +
                   "did not finish within the timeout (DSX_COMM_TIMEOUT)");
      break;
    }
    std::this_thread::sleep_for(kWatchInterval);  // the watchdog has stopped: nobody else needs mutex_
  }
}

// NCCL's point-to-point rule: a send and a receive that may wait on each other are issued in
// one group, inside which they progress independently; issued one by one on one stream, two
// ranks that each send first would each wait for the other's receive forever.
void NcclCommunicator::issue_held_locked() {
  if (held_.empty()) return;
  std::vector<PointToPoint> ops = std::move(held_);
  held_.clear();
  const std::string what = ops.size() == 1 ? ops[0].work->description()
                                           : "the group of " + std::to_string(ops.size()) + " send/recv from " +
                                                 ops[0].work->description();
  size_t tracked = 0;  // Works already handed to pending_ complete or fail from there
  auto fail_all = [&](const Error& e) {
    for (size_t i = tracked; i < ops.size(); ++i) ops[i].work->fail(e);
  };
  if (!broken_.empty()) {
    fail_all(Error(ErrorKind::Comm, "rank " + std::to_string(world_rank_) + ": " + what +
                                        " not run: the communicator was aborted earlier: " + broken_));
    return;
  }
  try {
    if (ncclResult_t r = ncclGroupStart(); r != ncclSuccess) settle(r, "ncclGroupStart");
    ncclResult_t first_error = ncclSuccess;
    for (const auto& op : ops) {
      ncclResult_t r = op.send ? ncclSend(op.data, op.count, nccl_type(op.dtype), op.peer, comm_, nccl_stream())
                               : ncclRecv(op.data, op.count, nccl_type(op.dtype), op.peer, comm_, nccl_stream());
      if (r != ncclSuccess && r != ncclInProgress) {
        first_error = r;
        break;
      }
    }
    ncclResult_t end = ncclGroupEnd();  // always closes the group, even after a failed call
    settle(first_error != ncclSuccess ? first_error : end, what);
    for (; tracked < ops.size(); ++tracked) track_locked(ops[tracked].work);
  } catch (const Error& e) {
    fail_all(e);
  }
}

void NcclCommunicator::Lifeline::issue_held() {
  std::lock_guard lock(mutex);
  if (!comm) return;
  std::lock_guard comm_lock(comm->mutex_);
  if (comm->held_.empty()) return;
  try {
    comm->use_device();
  } catch (const Error& e) {
    for (auto& op : comm->held_) op.work->fail(e);
    comm->held_.clear();
    return;
  }
  comm->issue_held_locked();
}

// In non-blocking mode a call may return ncclInProgress; nothing else may be issued until the
// communicator's state leaves it. Caller holds mutex_.
void NcclCommunicator::settle(ncclResult_t result, const std::string& what) {
  auto deadline = Clock::now() + options_.timeout;
  while (result == ncclInProgress) {
    if (Clock::now() > deadline) {
      abort_locked(what + " did not finish within the timeout (DSX_COMM_TIMEOUT): a peer is missing or hung");
      throw Error(ErrorKind::Timeout, "rank " + std::to_string(world_rank_) + ": nccl " + broken_);
    }
    ncclCommGetAsyncError(comm_, &result);
  }
  if (result != ncclSuccess) {
    std::string detail = std::string(ncclGetErrorString(result)) + (comm_ ? std::string(": ") + ncclGetLastError(comm_) : "");
    if (comm_) abort_locked(what + " failed: " + detail);
    throw Error(ErrorKind::Comm, "rank " + std::to_string(world_rank_) + ": nccl " + what + " failed: " + detail);
  }
}

template <typename F>
WorkHandle NcclCommunicator::enqueue(const std::string& name, const std::string& detail, F&& call) {
  return enqueue(name, detail, std::forward<F>(call), [] { return std::function<void()>{}; });
}

template <typename F, typename G>
WorkHandle NcclCommunicator::enqueue(const std::string& name, const std::string& detail, F&& call, G&& after) {
  std::string description = name + " #" + std::to_string(next_op_++) + " (" + detail + ", nccl)";
  auto work = std::make_shared<Work>(description, options_.timeout + std::chrono::seconds(30));
  std::lock_guard lock(mutex_);
  use_device();
  issue_held_locked();  // the sends/receives issued before this collective run before it
  if (!broken_.empty()) {
    work->fail(Error(ErrorKind::Comm, "rank " + std::to_string(world_rank_) + ": " + description +
                                          " not run: the communicator was aborted earlier: " + broken_));
    return work;
  }
  // Order after the caller's work, run on our stream, and mark the end with an event.
  after_caller_locked();
  std::function<void()> on_done;
  try {
    settle(call(), description);
    on_done = after();
  } catch (const Error& e) {
    work->fail(e);
    return work;
  }
  track_locked(work, std::move(on_done));
  return work;
}

template <typename F>
WorkHandle NcclCommunicator::enqueue_staged(const std::string& name, const std::string& detail, const void* in,
                                            size_t in_bytes, void* out, size_t out_bytes, F&& call) {
  const bool in_place = in == out;
  const bool stage_in = !gpu_->is_device_pointer(in);
  const bool stage_out = !gpu_->is_device_pointer(out);
  if (!stage_in && !stage_out) return enqueue(name, detail, [&] { return call(in, out); });
  // One pinned block and one device block: [input][output], or one region for an in-place op.
  const size_t in_part = stage_in ? in_bytes : 0;
  const size_t out_at = in_place ? 0 : in_part;
  const size_t total = std::max<size_t>(1, in_place ? in_bytes : in_part + (stage_out ? out_bytes : 0));
  PinnedBlock* block = nullptr;
  char* device = nullptr;
  auto run = [&] {  // under mutex_, on our stream after the caller's
    block = &pinned_block_locked(total);
    device = static_cast<char*>(gpu_->allocate_scratch(total, *stream_));
    auto* pinned = static_cast<char*>(block->data);
    const void* device_in = in;
    void* device_out = out;
    if (stage_in) {
      std::memcpy(pinned, in, in_bytes);
      gpu_->copy(device, pinned, in_bytes, *stream_);  // staging the input
      device_in = device;
    }
    if (stage_out) device_out = device + out_at;
    return call(device_in, device_out);
  };
  auto back = [&]() -> std::function<void()> {
    auto* pinned = static_cast<char*>(block->data);
    if (stage_out) {
      gpu_->copy(pinned + out_at, device + out_at, out_bytes, *stream_);  // staging the result
    }
    gpu_->free(device, total, *stream_);
    return [block, stage_out, out, from = pinned + out_at, out_bytes] {
      if (stage_out) std::memcpy(out, from, out_bytes);
      block->busy = false;
    };
  };
  return enqueue(name, detail, run, back);
}

WorkHandle NcclCommunicator::point_to_point(bool send, void* data, size_t count, DType dtype, int peer) {
  if (!gpu_->is_device_pointer(data)) {
    throw Error(ErrorKind::Usage, std::string("nccl ") + (send ? "send" : "recv") +
                                      " of host memory: NCCL moves GPU memory only; pass a device buffer or use ofi");
  }
  std::string description = std::string(send ? "send" : "recv") + " #" + std::to_string(next_op_++) + " (" +
                            elements(count, dtype) + (send ? " to" : " from") + " rank " + std::to_string(peer) +
                            ", nccl)";
  auto work = std::make_shared<Work>(description, options_.timeout + std::chrono::seconds(30));
  work->set_before_wait([life = lifeline_] { life->issue_held(); });
  std::lock_guard lock(mutex_);
  if (!broken_.empty()) {
    work->fail(Error(ErrorKind::Comm, "rank " + std::to_string(world_rank_) + ": " + description +
                                          " not run: the communicator was aborted earlier: " + broken_));
    return work;
  }
  use_device();
  after_caller_locked();  // the data is ready in the caller's stream order now, not when the group goes out
  held_.push_back({send, data, count, dtype, peer, work});
  return work;
}

template <typename F>
void NcclCommunicator::on_stream(device::Stream& stream, F&& issue) {
  device::Stream* previous;
  {
    std::lock_guard lock(mutex_);
    previous = caller_stream_;
    caller_stream_ = &stream;  // the operation waits for the caller's stream (ZeRO issues from one thread)
  }
  WorkHandle work = issue();
  {
    std::lock_guard lock(mutex_);
    caller_stream_ = previous;
    issue_held_locked();  // a send or receive goes out now, so the event below follows it
    auto back = gpu_->create_event();  // released once the wait has used it
    stream_->record(*back);
    stream.wait(*back);
  }
  // Outside the lock: a send's or receive's done() issues held operations, which takes it.
  if (work->done()) work->wait(std::chrono::milliseconds(0));  // a failure at issue time is thrown here
}

void NcclCommunicator::allreduce_on(device::Device& device, device::Stream& stream, void* data, size_t count,
                                    DType dtype, ReduceOp op) {
  if (device.host_accessible()) return Communicator::allreduce_on(device, stream, data, count, dtype, op);
  on_stream(stream, [&] { return allreduce(data, count, dtype, op); });
}

void NcclCommunicator::reduce_scatter_on(device::Device& device, device::Stream& stream, const void* input,
                                         void* output, size_t count, DType dtype, ReduceOp op) {
  if (device.host_accessible()) {
    return Communicator::reduce_scatter_on(device, stream, input, output, count, dtype, op);
  }
  on_stream(stream, [&] { return reduce_scatter(input, output, count, dtype, op); });
}

void NcclCommunicator::allgather_on(device::Device& device, device::Stream& stream, const void* input, void* output,
                                    size_t count, DType dtype) {
  if (device.host_accessible()) return Communicator::allgather_on(device, stream, input, output, count, dtype);
  on_stream(stream, [&] { return allgather(input, output, count, dtype); });
}

void NcclCommunicator::send_on(device::Device& device, device::Stream& stream, const void* data, size_t count,
                               DType dtype, int peer) {
  if (device.host_accessible()) return Communicator::send_on(device, stream, data, count, dtype, peer);
  on_stream(stream, [&] { return send(data, count, dtype, peer); });
}

void NcclCommunicator::recv_on(device::Device& device, device::Stream& stream, void* data, size_t count, DType dtype,
                               int peer) {
  if (device.host_accessible()) return Communicator::recv_on(device, stream, data, count, dtype, peer);
  on_stream(stream, [&] { return recv(data, count, dtype, peer); });
}

void NcclCommunicator::watch() {
  try {
    gpu_->make_current();
  } catch (const Error&) {
    // Then every event query fails, and the deadline aborts the operations in flight.
  }
  auto next_store_check = Clock::now();
  const std::string abort_key = key_ + "/abort";
  for (;;) {
    std::this_thread::sleep_for(kWatchInterval);
    std::string remote;
    if (Clock::now() >= next_store_check) {
      next_store_check = Clock::now() + kStoreInterval;
      try {
        if (auto reason = watchdog_store_->try_get(abort_key)) remote = "aborted by another rank: " + *reason;
        else if (auto dead = watchdog_store_->try_get(store_protocol::kDeadRanksKey)) remote = "rank(s) " + *dead + " died";
      } catch (const Error& e) {
        remote = std::string("rank 0, which serves the rendezvous store, is gone (") + e.what() + ")";
      }
    }
    std::lock_guard lock(mutex_);
    if (stopping_) return;
    if (!broken_.empty()) continue;
    complete_finished_locked();
    ncclResult_t async = ncclSuccess;
    ncclCommGetAsyncError(comm_, &async);
    std::string reason;
    if (async != ncclSuccess && async != ncclInProgress) {
      reason = std::string("NCCL reported an asynchronous error: ") + ncclGetErrorString(async) + ": " + ncclGetLastError(comm_);
    } else if (!pending_.empty() && Clock::now() > pending_.front().deadline) {
      reason = pending_.front().work->description() + " timed out (DSX_COMM_TIMEOUT=" +
               std::to_string(options_.timeout.count() / 1000) + " s): a peer died or hung";
    } else if (!remote.empty() && !pending_.empty()) {
      reason = remote;
    }
    if (reason.empty()) continue;
    abort_locked(reason);
    try {
      watchdog_store_->set(abort_key, "rank " + std::to_string(world_rank_) + ": " + reason);
    } catch (const Error&) {
      // The store is gone; the other ranks find out the same way we did.
    }
  }
}

// Aborts the communicator and fails every pending Work. Caller holds mutex_.
void NcclCommunicator::abort_locked(const std::string& reason) {
  if (!broken_.empty()) return;
  broken_ = reason;
  ncclCommAbort(comm_);  // releases kernels spinning on a dead peer
  comm_ = nullptr;
  for (auto& p : pending_) {
    p.work->fail(Error(ErrorKind::Comm, "rank " + std::to_string(world_rank_) + ": " + p.work->description() +
                                            " failed: " + reason + " - the communicator was aborted; check the other ranks' logs"));
  }
  pending_.clear();
  for (auto& p : held_) {
    p.work->fail(Error(ErrorKind::Comm, "rank " + std::to_string(world_rank_) + ": " + p.work->description() +
                                            " not run: " + reason + " - the communicator was aborted"));
  }
  held_.clear();
}

WorkHandle NcclCommunicator::allreduce(void* data, size_t count, DType dtype, ReduceOp op) {
  require_nccl_support(nccl_version_, dtype, op, "allreduce");
  const size_t bytes = count * kernels::dtype_size(dtype);
  return enqueue_staged(std::string("allreduce ") + kernels::reduce_op_name(op), elements(count, dtype), data, bytes,
                        data, bytes, [&](const void* in, void* out) {
                          return ncclAllReduce(in, out, count, nccl_type(dtype), nccl_op(op), comm_, nccl_stream());
                        });
}

WorkHandle NcclCommunicator::reduce_scatter(const void* input, void* output, size_t count, DType dtype, ReduceOp op) {
  require_nccl_support(nccl_version_, dtype, op, "reduce_scatter");
  const size_t bytes = count * kernels::dtype_size(dtype);
  return enqueue_staged(std::string("reduce_scatter ") + kernels::reduce_op_name(op),
                        elements(count, dtype) + " per rank", input, bytes * static_cast<size_t>(size()), output,
                        bytes, [&](const void* in, void* out) {
                          return ncclReduceScatter(in, out, count, nccl_type(dtype), nccl_op(op), comm_, nccl_stream());
                        });
}

WorkHandle NcclCommunicator::allgather(const void* input, void* output, size_t count, DType dtype) {
  require_nccl_support(nccl_version_, dtype, "allgather");
  const size_t bytes = count * kernels::dtype_size(dtype);
  return enqueue_staged("allgather", elements(count, dtype) + " per rank", input, bytes, output,
                        bytes * static_cast<size_t>(size()), [&](const void* in, void* out) {
                          return ncclAllGather(in, out, count, nccl_type(dtype), comm_, nccl_stream());
                        });
}

WorkHandle NcclCommunicator::broadcast(void* data, size_t count, DType dtype, int root) {
  if (root < 0 || root >= size()) throw Error(ErrorKind::Usage, "broadcast root " + std::to_string(root) + " is not a rank of this group");
  require_nccl_support(nccl_version_, dtype, "broadcast");
  const size_t bytes = count * kernels::dtype_size(dtype);
  return enqueue_staged("broadcast", elements(count, dtype) + " from rank " + std::to_string(root), data, bytes, data,
                        bytes, [&](const void* in, void* out) {
                          return ncclBroadcast(in, out, count, nccl_type(dtype), root, comm_, nccl_stream());
                        });
}

WorkHandle NcclCommunicator::barrier() {
  return enqueue("barrier", std::to_string(size()) + " ranks",
                 [&] { return ncclAllReduce(barrier_word_, barrier_word_, 1, ncclFloat32, ncclSum, comm_, nccl_stream()); });
}

WorkHandle NcclCommunicator::send(const void* data, size_t count, DType dtype, int peer) {
  if (peer < 0 || peer >= size()) throw Error(ErrorKind::Usage, "send to rank " + std::to_string(peer) + ": not a rank of this group");
  require_nccl_support(nccl_version_, dtype, "send");
  return point_to_point(true, const_cast<void*>(data), count, dtype, peer);  // ncclSend reads it only
}

WorkHandle NcclCommunicator::recv(void* data, size_t count, DType dtype, int peer) {
  if (peer < 0 || peer >= size()) throw Error(ErrorKind::Usage, "recv from rank " + std::to_string(peer) + ": not a rank of this group");
  require_nccl_support(nccl_version_, dtype, "recv");
  return point_to_point(false, data, count, dtype, peer);
}

std::unique_ptr<Communicator> NcclCommunicator::new_group(const std::vector<int>& ranks) {
  std::vector<int> world_ranks;
  std::set<int> seen;
  for (int r : ranks) {
    if (r < 0 || r >= size() || !seen.insert(r).second) {
      throw Error(ErrorKind::Usage, "new_group: rank " + std::to_string(r) + " is not a rank of this group or is listed twice");
    }
    world_ranks.push_back(members_[static_cast<size_t>(r)]);
  }
  if (!seen.count(rank_)) throw Error(ErrorKind::Usage, "new_group: only the members of a group create it");
  const std::string list = join(world_ranks, ",");
  int nth;
  {
    std::lock_guard lock(mutex_);
    nth = groups_made_[list]++;
  }
  return std::make_unique<NcclCommunicator>(store_, std::move(world_ranks), world_rank_, local_rank_,
                                            key_ + "/group/" + list + "/" + std::to_string(nth), options_);
}

}  // namespace dsx::comm::nccl
