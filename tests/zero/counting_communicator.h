// A Communicator that hands every operation to a real one and counts, per kind, the calls and
// the message sizes, so a test can say which collectives ZeRO issued and how large they were.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "comm/communicator.h"

namespace dsx::test {

class CountingCommunicator final : public comm::Communicator {
 public:
  struct Count {
    size_t calls = 0;
    size_t bytes = 0;            // message bytes, as the comms logger counts them
    std::vector<size_t> counts;  // elements per call (per rank's block for reduce-scatter/allgather)
  };

  explicit CountingCommunicator(comm::Communicator& inner) : inner_(inner) {}

  const Count& count(const std::string& op) { return counts_[op]; }
  void reset() { counts_.clear(); }

  int rank() const override { return inner_.rank(); }
  int size() const override { return inner_.size(); }
  std::string backend() const override { return inner_.backend(); }
  comm::WorkHandle allreduce(void* data, size_t count, comm::DType dtype, comm::ReduceOp op) override {
    note("allreduce", count, count * kernels::dtype_size(dtype));
    return inner_.allreduce(data, count, dtype, op);
  }
  comm::WorkHandle reduce_scatter(const void* in, void* out, size_t count, comm::DType dtype,
                                  comm::ReduceOp op) override {
    note("reduce_scatter", count, count * size() * kernels::dtype_size(dtype));
    return inner_.reduce_scatter(in, out, count, dtype, op);
  }
  comm::WorkHandle allgather(const void* in, void* out, size_t count, comm::DType dtype) override {
    note("allgather", count, count * size() * kernels::dtype_size(dtype));
    return inner_.allgather(in, out, count, dtype);
  }
  comm::WorkHandle broadcast(void* data, size_t count, comm::DType dtype, int root) override {
    note("broadcast", count, count * kernels::dtype_size(dtype));
    return inner_.broadcast(data, count, dtype, root);
  }
  comm::WorkHandle barrier() override { return inner_.barrier(); }
  comm::WorkHandle send(const void* data, size_t count, comm::DType dtype, int peer) override {
    note("send", count, count * kernels::dtype_size(dtype));
    return inner_.send(data, count, dtype, peer);
  }
  comm::WorkHandle recv(void* data, size_t count, comm::DType dtype, int peer) override {
    note("recv", count, count * kernels::dtype_size(dtype));
    return inner_.recv(data, count, dtype, peer);
  }
  std::unique_ptr<comm::Communicator> new_group(const std::vector<int>& ranks) override {
    return inner_.new_group(ranks);
  }

 private:
  void note(const std::string& op, size_t count, size_t bytes) {
    Count& c = counts_[op];
    ++c.calls;
    c.bytes += bytes;
    c.counts.push_back(count);
  }

  comm::Communicator& inner_;
  std::map<std::string, Count> counts_;
};

}  // namespace dsx::test
