// ds_config's comms_logger: a Communicator that passes every operation to another one and records
// its kind, message size and latency (issue to completion), then prints DeepSpeed's summary table
// with algorithm and bus bandwidth (nccl-tests' factors). `prof_ops` limits what is recorded.
#pragma once

#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "comm/communicator.h"

namespace dsx::comm {

class LoggingCommunicator final : public Communicator {
 public:
  // `prof_ops` empty (or prof_all): every operation; else only these names ("all_reduce", ...).
  LoggingCommunicator(Communicator& inner, std::vector<std::string> prof_ops, bool verbose);

  int rank() const override { return inner_.rank(); }
  int size() const override { return inner_.size(); }
  std::string backend() const override { return inner_.backend(); }
  WorkHandle allreduce(void* data, size_t count, DType dtype, ReduceOp op) override;
  WorkHandle reduce_scatter(const void* input, void* output, size_t count, DType dtype, ReduceOp op) override;
  WorkHandle allgather(const void* input, void* output, size_t count, DType dtype) override;
  WorkHandle broadcast(void* data, size_t count, DType dtype, int root) override;
  WorkHandle barrier() override;
  WorkHandle send(const void* data, size_t count, DType dtype, int peer) override;
  WorkHandle recv(void* data, size_t count, DType dtype, int peer) override;
  std::unique_ptr<Communicator> new_group(const std::vector<int>& ranks) override;
  // The stream forms go to the inner communicator's own (NCCL enqueues on the stream; a host
  // wait here would stall every ZeRO collective). They finish on the stream, out of the host's
  // sight, so they are counted without a latency.
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

  // DeepSpeed's table: per operation and message size, count, total and average latency,
  // average algorithm and bus bandwidth. Operations still running are left out; stream-ordered
  // ones are counted with "-" for what only a timed operation gives.
  std::string summary() const;

 private:
  struct Record {
    std::string op;
    size_t bytes;
    std::chrono::steady_clock::time_point issued;
    WorkHandle work;  // null for a stream-ordered operation (no latency)
  };
  WorkHandle record(const std::string& op, size_t bytes, WorkHandle work,
                    std::chrono::steady_clock::time_point issued);

  Communicator& inner_;
  std::vector<std::string> prof_ops_;
  bool verbose_;
  mutable std::mutex mutex_;
  std::vector<Record> records_;
};

}  // namespace dsx::comm
