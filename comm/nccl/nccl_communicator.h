// The nccl backend (CUDA builds only): collectives on device memory through NCCL.
//
// Set-up: group rank 0 draws the NCCL unique id and publishes it through the store; every rank
// creates a non-blocking communicator (config.blocking = 0) and polls its state with a deadline.
// Each operation waits for the caller's stream (an event), runs on the communicator's own stream
// and records a completion event. Every call first makes this rank's GPU current on the calling
// thread (CUDA's current device is per thread). Sends and receives follow NCCL's point-to-point
// rule: they are held and issued together in one ncclGroupStart/End - when any Work is waited on
// or polled, or before the next collective - so two ranks that each send, then receive, do not
// deadlock (inside a group the transfers progress independently). The run-time NCCL version is
// checked: bf16 and ncclAvg need 2.10. Closing the communicator completes the work in flight, or
// fails it once the timeout passes; no Work is left waiting. A watchdog thread completes Works in issue order as their
// events fire, and aborts the communicator (ncclCommAbort) when an operation outlives the
// timeout, NCCL reports an asynchronous error, another rank publishes an abort, or a rank
// vanishes from the store - so kernels spinning on a dead peer are released instead of hanging.
// One mutex keeps the caller and the watchdog from ever being inside NCCL at the same time.
// NCCL reads device memory only; a collective handed host memory (a loss to average, a timing, a
// flag: the engine's small host values) runs on a device copy - the input through pinned memory
// to the GPU, the result back to pinned memory on our stream, and into the caller's memory when
// the Work completes - so every caller of the Communicator interface works over nccl. Sends and
// receives take device memory only.
#pragma once

#include <cuda_runtime.h>
#include <nccl.h>

#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "comm/communicator.h"
#include "comm/nccl/nccl_version.h"
#include "comm/rendezvous.h"
#include "device/device.h"

namespace dsx::comm::nccl {

std::unique_ptr<Communicator> create_nccl_world(Rendezvous& rv, const CommOptions& options);

class NcclCommunicator final : public Communicator {
 public:
  // `members`: world ranks of this group, in group order. `key`: store key of the group's id.
  // The GPU is the local_rank-th visible one (kernels/device_choice.h); too few GPUs is an error.
  // Memory, streams and events come from the cuda device (device/cuda_device.h) on that GPU.
  NcclCommunicator(Store& store, std::vector<int> members, int world_rank, int local_rank, std::string key,
                   const CommOptions& options);
  ~NcclCommunicator() override;

  int rank() const override { return rank_; }
  int size() const override { return static_cast<int>(members_.size()); }
  std::string backend() const override { return "nccl"; }

  WorkHandle allreduce(void* data, size_t count, DType dtype, ReduceOp op) override;
  WorkHandle reduce_scatter(const void* input, void* output, size_t count, DType dtype, ReduceOp op) override;
  WorkHandle allgather(const void* input, void* output, size_t count, DType dtype) override;
  WorkHandle broadcast(void* data, size_t count, DType dtype, int root) override;
  WorkHandle barrier() override;
  WorkHandle send(const void* data, size_t count, DType dtype, int peer) override;
  WorkHandle recv(void* data, size_t count, DType dtype, int peer) override;
  std::unique_ptr<Communicator> new_group(const std::vector<int>& ranks) override;

  // Ordered on a device stream without the host: our stream waits for the caller's stream, runs
  // the operation, and the caller's stream waits for ours (a cpu device gets the base class's
  // host-task form). Failures reach the caller through the stream (an aborted communicator's
  // operations fail its work) and through the watchdog, as for the Work forms.
  void allreduce_on(device::Device& device, device::Stream& stream, void* data, size_t count, DType dtype,
                    ReduceOp op) override;
  void reduce_scatter_on(device::Device& device, device::Stream& stream, const void* input, void* output,
                         size_t count, DType dtype, ReduceOp op) override;
  void allgather_on(device::Device& device, device::Stream& stream, const void* input, void* output, size_t count,
                    DType dtype) override;
  void send_on(device::Device& device, device::Stream& stream, const void* data, size_t count, DType dtype,
               int peer) override;
  void recv_on(device::Device& device, device::Stream& stream, void* data, size_t count, DType dtype,
               int peer) override;

 private:
  struct Pending {
    WorkHandle work;
    std::unique_ptr<device::Event> done;
    Clock::time_point deadline;
    std::function<void()> on_done;  // before the Work completes: a staged result to the caller
  };
  // Pinned host memory a staged collective copies through; reused once its Work has ended.
  struct PinnedBlock {
    void* data = nullptr;
    size_t bytes = 0;
    bool busy = false;
  };
  struct PointToPoint {  // a send or recv held for the next group
    bool send;
    void* data;
    size_t count;
    DType dtype;
    int peer;
    WorkHandle work;
  };
  // Lets a Work issue the held group without outliving the communicator.
  struct Lifeline {
    std::mutex mutex;
    NcclCommunicator* comm = nullptr;
    void issue_held();
  };
  template <typename F>
  WorkHandle enqueue(const std::string& name, const std::string& detail, F&& call);
  // The same with `after()` run once the operation is on our stream; the function it returns
  // runs when the operation has completed, before its Work does.
  template <typename F, typename G>
  WorkHandle enqueue(const std::string& name, const std::string& detail, F&& call, G&& after);
  // `call` runs the operation on device memory (input, output); `in`/`out` are the caller's,
  // device memory (run as they are) or host memory (staged, see above).
  template <typename F>
  WorkHandle enqueue_staged(const std::string& name, const std::string& detail, const void* in, size_t in_bytes,
                            void* out, size_t out_bytes, F&& call);
  PinnedBlock& pinned_block_locked(size_t bytes);
  WorkHandle point_to_point(bool send, void* data, size_t count, DType dtype, int peer);
  // Runs issue() (one of the Work forms) ordered after `stream` and orders `stream` after it.
  template <typename F>
  void on_stream(device::Stream& stream, F&& issue);
  void use_device();                // our GPU, current on the calling thread
  cudaStream_t nccl_stream() const { return static_cast<cudaStream_t>(stream_->native()); }
  void after_caller_locked();       // our stream waits for the caller's
  // Completion event on our stream; `on_done` runs once it fired, before the Work completes.
  void track_locked(WorkHandle work, std::function<void()> on_done = {});
  void issue_held_locked();         // the held sends/receives, as one group
  void complete_finished_locked();  // completes Works whose events fired, in issue order
  bool finished_locked(device::Event& done);
  void drain_locked();              // at close: complete everything, or fail it at the deadline
  void settle(ncclResult_t result, const std::string& what);  // waits out ncclInProgress
  void watch();
  void abort_locked(const std::string& reason);

  Store& store_;
  std::unique_ptr<Store> watchdog_store_;
  std::vector<int> members_;
  int rank_ = -1, world_rank_, local_rank_;
  std::string key_;
  CommOptions options_;
  std::unique_ptr<device::Device> gpu_;  // this rank's GPU, made current first
  int nccl_version_ = 0;  // ncclGetVersion of the library loaded at run time
  ncclComm_t comm_ = nullptr;
  std::unique_ptr<device::Stream> stream_;  // ours: NCCL runs here
  // The legacy default stream of our GPU, which itself waits for every blocking stream: what a
  // Work-form operation waits for. An _on form waits for the caller's stream instead.
  std::unique_ptr<device::Stream> legacy_stream_;
  device::Stream* caller_stream_ = nullptr;
  std::unique_ptr<device::Event> ready_;
  float* barrier_word_ = nullptr;
  uint32_t next_op_ = 0;

  std::mutex mutex_;  // NCCL calls, pending_, broken_
  std::deque<Pending> pending_;
  std::vector<PointToPoint> held_;  // sends/receives not yet issued
  std::shared_ptr<Lifeline> lifeline_ = std::make_shared<Lifeline>();
  std::string broken_;
  bool stopping_ = false;
  std::map<std::string, int> groups_made_;
  std::vector<std::unique_ptr<PinnedBlock>> pinned_;  // freed when the communicator closes
  std::thread watchdog_;
};

}  // namespace dsx::comm::nccl
