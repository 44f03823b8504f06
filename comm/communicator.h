// The Communicator: collectives and point-to-point transfers over a group of ranks, each
// returning a Work to wait on. Operations run in the order they were issued and complete in that
// order; several may be in flight at once. Every rank of a group must issue the same collectives
// in the same order (as with NCCL and MPI). Backends: ofi (libfabric, host memory; device memory
// is staged through host buffers) and nccl (device memory, CUDA builds only).
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "comm/host_memory.h"
#include "device/device.h"
#include "comm/work.h"
#include "kernels/dtype.h"
#include "kernels/reduce.h"

namespace dsx::comm {

using kernels::DType;
using kernels::ReduceOp;

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  // "ofi/shm", "ofi/tcp;ofi_rxm", "nccl": for logs and benchmark tables.
  virtual std::string backend() const = 0;

  // In place: every rank ends with data[i] = op over ranks of data[i]. Avg divides the sum by
  // size() once, at the end.
  virtual WorkHandle allreduce(void* data, size_t count, DType dtype, ReduceOp op) = 0;
  // input holds size() blocks of `count`; rank r gets block r reduced over all ranks. In place
  // when output == input + rank * count.
  virtual WorkHandle reduce_scatter(const void* input, void* output, size_t count, DType dtype, ReduceOp op) = 0;
  // output gets every rank's `count` input elements, in rank order. In place when
  // input == output + rank * count.
  virtual WorkHandle allgather(const void* input, void* output, size_t count, DType dtype) = 0;
  virtual WorkHandle broadcast(void* data, size_t count, DType dtype, int root) = 0;
  virtual WorkHandle barrier() = 0;
  // Point to point. Like blocking MPI_Send/MPI_Recv, a large send completes only once the peer
  // receives it, so two ranks exchanging data must order their calls (one sends first).
  virtual WorkHandle send(const void* data, size_t count, DType dtype, int peer) = 0;
  virtual WorkHandle recv(void* data, size_t count, DType dtype, int peer) = 0;

  // ---- the same operations ordered on a device stream ----
  // Each starts after the work enqueued earlier on `stream` and finishes before the stream's
  // later work starts; nothing blocks the caller. nccl enqueues on the stream itself; host
  // backends (ofi) run the operation in a host task of the stream and wait for it there (with the
  // communicator's timeout), so it completes as a point in the stream that events can mark. A
  // failure fails the stream (its synchronize rethrows it). Issue all of a group's operations
  // through one stream, or order the streams, so every rank issues them in the same order.
  virtual void allreduce_on(device::Device& device, device::Stream& stream, void* data, size_t count, DType dtype,
                            ReduceOp op);
  virtual void reduce_scatter_on(device::Device& device, device::Stream& stream, const void* input, void* output,
                                 size_t count, DType dtype, ReduceOp op);
  virtual void allgather_on(device::Device& device, device::Stream& stream, const void* input, void* output,
                            size_t count, DType dtype);
  virtual void send_on(device::Device& device, device::Stream& stream, const void* data, size_t count, DType dtype,
                       int peer);
  virtual void recv_on(device::Device& device, device::Stream& stream, void* data, size_t count, DType dtype,
                       int peer);

  // A communicator over a subset of this group's ranks (their order gives the new ranks), for
  // ZeRO's data-parallel and hybrid-sharding groups. Only the members call it, all with the same
  // list and in the same order relative to their other new_group calls; a non-member calling it
  // gets a Usage error.
  virtual std::unique_ptr<Communicator> new_group(const std::vector<int>& ranks) = 0;
};

// Settings every backend shares. Defaults suit a training job; tests shorten the timeout.
struct CommOptions {
  std::string backend = "auto";  // "ofi", "nccl", or "auto" (nccl when buffers_on_gpu, else ofi)
  bool buffers_on_gpu = false;   // the buffers handed to collectives are GPU memory
  std::string provider;          // ofi: "shm", "tcp", "efa", ...; "" = FI_PROVIDER, else automatic
  // How long one operation may wait for a peer before it fails naming the peer. Set by
  // DSX_COMM_TIMEOUT (seconds) or DEEPSPEED_TIMEOUT (minutes, as DeepSpeed reads it).
  std::chrono::milliseconds timeout = std::chrono::minutes(5);
  size_t chunk_bytes = size_t{512} << 10;  // ring pipeline slice
  size_t small_bytes = size_t{64} << 10;  // allreduce at or below this uses recursive doubling
  bool force_registration = false;        // ofi: register buffers even if the provider needs no descriptors
  // ofi/shm: allreduce, reduce-scatter and allgather through memory shared by the ranks of a
  // group instead of the fabric (DSX_COMM_SHARED_MEMORY=0 turns it off), in rounds of this many
  // bytes per block.
  bool shared_memory = true;
  size_t shared_memory_chunk_bytes = size_t{64} << 10;
  // Allreduce at or below this: one step, tried on the caller's thread first.
  size_t shared_memory_one_shot_bytes = size_t{64} << 10;
  // Collectives of at least this many bytes read the peers' buffers in place when every rank's
  // comes from allocate_shared_host (comm/host_memory.h). DSX_COMM_IN_PLACE=0: never.
  size_t shared_memory_in_place_bytes = kInPlaceMinBytes;
};

// Reads DSX_COMM_TIMEOUT / DEEPSPEED_TIMEOUT, DSX_COMM_BACKEND and DSX_OFI_PROVIDER over `base`.
CommOptions comm_options_from_environment(CommOptions base = {});

}  // namespace dsx::comm
