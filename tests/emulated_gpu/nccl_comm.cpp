// The emulated NCCL's communicators: unique ids, joining, finalizing, destroying, aborting, and
// the error reports. Ranks join through a POSIX shm segment named by the unique id (nccl_shm.h);
// NCCL's refusals hold: two ranks of one communicator on one GPU fail with ncclInvalidUsage.
// Waits that NCCL would hang in end after DSX_EMULATED_NCCL_TIMEOUT_SECONDS (default 60).
#include "tests/emulated_gpu/nccl_comm.h"

#include <nccl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <thread>

#include "tests/emulated_gpu/memory.h"
#include "tests/emulated_gpu/runtime.h"

using namespace dsx::emu;
using namespace dsx::emu::nccl;

namespace dsx::emu::nccl {
namespace {
thread_local std::string t_last_error;
}  // namespace

ncclResult_t refuse(ncclResult_t result, const std::string& call, const std::string& why) {
  say(call + ": " + why);
  t_last_error = call + ": " + why;
  return result;
}
}  // namespace dsx::emu::nccl

namespace {

constexpr char kIdTag[] = "dsx-emulated-nccl";  // the id's first bytes, then the shm name

std::chrono::duration<double> timeout_from_environment() {
  const char* s = std::getenv("DSX_EMULATED_NCCL_TIMEOUT_SECONDS");
  const double v = s ? std::atof(s) : 0.0;
  return std::chrono::duration<double>(v > 0 ? v : 60.0);
}

// After a fault the device runs nothing more: the communicator's queued work never will.
bool device_faulted(const Comm& c) {
  const int previous = current_device();
  set_current_device(c.device);
  const bool faulted = sticky_error() != cudaSuccess;
  set_current_device(previous);
  return faulted;
}

// Waits (at most the timeout) until the communicator's work ran, or its device faulted.
void drain(const Comm& c) {
  const auto deadline = std::chrono::steady_clock::now() + c.timeout;
  while (c.outstanding.load() > 0 && std::chrono::steady_clock::now() < deadline &&
         !device_faulted(c))
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

}  // namespace

extern "C" {

ncclResult_t ncclGetVersion(int* version) {
  if (!version) return ncclInvalidArgument;
  *version = NCCL_VERSION_CODE;
  return ncclSuccess;
}

ncclResult_t ncclGetUniqueId(ncclUniqueId* id) {
  if (!id) return refuse(ncclInvalidArgument, "ncclGetUniqueId", "a null id");
  std::random_device random;
  char name[64];
  std::snprintf(name, sizeof name, "/dsx-nccl-%d-%08x%08x", int(getpid()), unsigned(random()),
                unsigned(random()));
  std::memset(id->internal, 0, sizeof id->internal);
  std::memcpy(id->internal, kIdTag, sizeof kIdTag);
  std::memcpy(id->internal + sizeof kIdTag, name, std::strlen(name) + 1);
  return ncclSuccess;
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t* out, int nranks, ncclUniqueId id, int rank,
                                    ncclConfig_t* config) {
  const char* call = "ncclCommInitRank";
  if (!out) return refuse(ncclInvalidArgument, call, "a null communicator pointer");
  *out = nullptr;
  if (nranks < 1 || rank < 0 || rank >= nranks)
    return refuse(ncclInvalidArgument, call,
                  "rank " + std::to_string(rank) + " of " + std::to_string(nranks));
  if (std::memcmp(id.internal, kIdTag, sizeof kIdTag) != 0 ||
      !std::memchr(id.internal, 0, sizeof id.internal - 1))
    return refuse(ncclInvalidArgument, call, "the unique id did not come from ncclGetUniqueId");
  if (config && config->magic != 0xcafebeef)
    return refuse(ncclInvalidArgument, call,
                  "the config was not set up with NCCL_CONFIG_INITIALIZER");
  auto c = std::make_shared<Comm>();
  c->rank = rank, c->nranks = nranks, c->device = current_device();
  c->blocking = !config || config->blocking != 0;  // NCCL_CONFIG_UNDEF_INT: blocking
  c->timeout = timeout_from_environment();
  c->sent.assign(size_t(nranks), 0);
  c->received.assign(size_t(nranks), 0);
  const int gpu = physical_gpu(c->device);
  std::string why;
  if (!c->segment.open(std::string(id.internal + sizeof kIdTag), nranks, &why)) {
    c->segment.unlink();
    return refuse(ncclInvalidArgument, call, why);
  }
  RankArea& me = c->segment.rank(rank);
  int32_t none = 0;
  if (!me.pid.compare_exchange_strong(none, int32_t(getpid())))
    return refuse(ncclInvalidUsage, call,
                  "rank " + std::to_string(rank) + " joined this communicator twice");
  me.gpu = gpu;
  me.state.store(kAttached, std::memory_order_release);
  // The last rank to map the segment unlinks its name: the mappings keep it alive.
  if (c->segment.header().attached.fetch_add(1) + 1 == nranks) c->segment.unlink();
  c->segment.ring_doorbell();
  int missing = -1;
  WaitEnd end = c->segment.wait(
      [&] {
        for (int r = 0; r < nranks; ++r)
          if (c->segment.rank(r).state.load(std::memory_order_acquire) == kAbsent)
            return missing = r;
        return -1;
      },
      c->aborted, c->timeout);
  if (end.kind != WaitEnd::kReady) {
    c->segment.unlink();
    me.state.store(kAborted);
    c->segment.ring_doorbell();
    return refuse(
        end.kind == WaitEnd::kPeerGone ? ncclRemoteError : ncclSystemError, call,
        "rank " + std::to_string(rank) + " waited for rank " + std::to_string(missing) +
            " to join: " +
            (end.reason.empty() ? "it never called ncclCommInitRank with this id" : end.reason));
  }
  for (int r = 0; r < nranks; ++r) {
    if (r == rank || c->segment.rank(r).gpu != gpu) continue;
    me.state.store(kAborted);
    c->segment.ring_doorbell();
    return refuse(
        ncclInvalidUsage, call,
        "ranks " + std::to_string(std::min(r, rank)) + " and " + std::to_string(std::max(r, rank)) +
            " of one communicator both use GPU " + std::to_string(gpu) +
            ": NCCL needs a GPU of its own for each rank (cudaSetDevice before ncclCommInitRank)");
  }
  *out = new ncclComm{std::move(c)};
  return ncclSuccess;
}

ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank) {
  return ncclCommInitRankConfig(comm, nranks, id, rank, nullptr);
}

// Flushes: a blocking communicator waits here for its work; a non-blocking one says
// ncclInProgress, through ncclCommGetAsyncError too, until its work is done.
ncclResult_t ncclCommFinalize(ncclComm_t comm) {
  if (!comm || !comm->c)
    return refuse(ncclInvalidArgument, "ncclCommFinalize", "a null communicator");
  Comm& c = *comm->c;
  c.finalizing = true;
  if (!c.blocking) return c.outstanding.load() > 0 ? ncclInProgress : c.failed();
  drain(c);
  return c.failed();
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  if (!comm || !comm->c)
    return refuse(ncclInvalidArgument, "ncclCommDestroy", "a null communicator");
  Comm& c = *comm->c;
  drain(c);
  c.segment.rank(c.rank).state.store(kLeft, std::memory_order_release);
  c.segment.ring_doorbell();
  c.segment.unlink();
  delete comm;  // work still queued holds the communicator's state
  return ncclSuccess;
}

// Ends every wait of this rank at once; the peers see that this rank aborted.
ncclResult_t ncclCommAbort(ncclComm_t comm) {
  if (!comm) return ncclSuccess;
  if (comm->c) {
    Comm& c = *comm->c;
    c.aborted = true;
    c.segment.rank(c.rank).state.store(kAborted, std::memory_order_release);
    c.segment.ring_doorbell();
    c.turn_changed.notify_all();
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (c.running.load() > 0 && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    c.segment.unlink();
  }
  delete comm;
  return ncclSuccess;
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* result) {
  if (!comm || !comm->c || !result) return ncclInvalidArgument;
  Comm& c = *comm->c;
  *result = c.failed();
  if (*result == ncclSuccess && c.finalizing && c.outstanding.load() > 0)
    *result = device_faulted(c) ? ncclUnhandledCudaError : ncclInProgress;
  return ncclSuccess;
}

ncclResult_t ncclCommCount(const ncclComm_t comm, int* count) {
  if (!comm || !comm->c || !count) return ncclInvalidArgument;
  *count = comm->c->nranks;
  return ncclSuccess;
}

ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int* device) {
  if (!comm || !comm->c || !device) return ncclInvalidArgument;
  *device = comm->c->device;
  return ncclSuccess;
}

ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank) {
  if (!comm || !comm->c || !rank) return ncclInvalidArgument;
  *rank = comm->c->rank;
  return ncclSuccess;
}

const char* ncclGetErrorString(ncclResult_t result) {
  switch (result) {
    case ncclSuccess:
      return "no error";
    case ncclUnhandledCudaError:
      return "unhandled cuda error";
    case ncclSystemError:
      return "unhandled system error (emulated NCCL: a wait timed out or failed)";
    case ncclInternalError:
      return "internal error";
    case ncclInvalidArgument:
      return "invalid argument";
    case ncclInvalidUsage:
      return "invalid usage";
    case ncclRemoteError:
      return "remote process exited or there was a network error";
    case ncclInProgress:
      return "NCCL operation in progress";
    default:
      return "unknown result code";
  }
}

// The communicator's asynchronous error if it has one, else this thread's last refusal.
const char* ncclGetLastError(ncclComm_t comm) {
  if (comm && comm->c && comm->c->failed() != ncclSuccess) return comm->c->message.c_str();
  return t_last_error.c_str();
}
ncclResult_t ncclMemAlloc(void** ptr, size_t size) {
  if (!ptr) return ncclInvalidArgument;
  *ptr = device_allocate(current_device(), size);
  return *ptr ? ncclSuccess
              : refuse(ncclUnhandledCudaError, "ncclMemAlloc", "out of device memory");
}

ncclResult_t ncclMemFree(void* ptr) {
  if (ptr && !device_free(ptr))
    return refuse(ncclInvalidArgument, "ncclMemFree", "not an ncclMemAlloc pointer");
  return ncclSuccess;
}

}  // extern "C"
