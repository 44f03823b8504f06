// The ofi backend's Communicator: a group of ranks over libfabric. Operations are queued to the
// shared ProgressEngine (one per process and world), which runs them in issue order with the
// algorithms of comm/algorithms: recursive doubling for small allreduces, pipelined rings for
// large ones and for reduce-scatter and allgather, a chain for broadcast. Over shm, allreduce,
// reduce-scatter and allgather go through segments the group's ranks share (host_segments.h)
// when the host allows it.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "comm/ofi/ofi_transport.h"
#include "comm/ofi/progress_engine.h"
#include "comm/rendezvous.h"

namespace dsx::comm::ofi {

// Picks the provider (config, then FI_PROVIDER, then automatic: shm when every rank is on one
// host, else efa where it exists, else tcp), opens the endpoint, exchanges addresses through the
// store and returns the world communicator. `rv` must outlive the communicator.
std::unique_ptr<Communicator> create_ofi_world(Rendezvous& rv, const CommOptions& options);

class OfiCommunicator final : public Communicator {
 public:
  struct Shared;  // engine + store connection, shared by the world and its groups

  OfiCommunicator(std::shared_ptr<Shared> shared, std::vector<int> members, uint32_t group_id);
  // Whether allreduce, reduce-scatter and allgather go through shared memory (for tests and logs).
  bool uses_shared_memory() const { return segments_ != nullptr; }
  // Collectives so far that read every rank's buffer in place (host_memory.h); read it after
  // waiting for them.
  uint64_t in_place_operations() const { return segments_ ? segments_->in_place_operations.load() : 0; }

  int rank() const override { return rank_; }
  int size() const override { return static_cast<int>(members_->size()); }
  std::string backend() const override;

  WorkHandle allreduce(void* data, size_t count, DType dtype, ReduceOp op) override;
  WorkHandle reduce_scatter(const void* input, void* output, size_t count, DType dtype, ReduceOp op) override;
  WorkHandle allgather(const void* input, void* output, size_t count, DType dtype) override;
  WorkHandle broadcast(void* data, size_t count, DType dtype, int root) override;
  WorkHandle barrier() override;
  WorkHandle send(const void* data, size_t count, DType dtype, int peer) override;
  WorkHandle recv(void* data, size_t count, DType dtype, int peer) override;
  std::unique_ptr<Communicator> new_group(const std::vector<int>& ranks) override;

 private:
  WorkHandle one_shot_allreduce(void* data, size_t count, DType dtype, ReduceOp op);
  using Body = std::function<void(OfiTransport&)>;
  // An operation's first part, run on the caller's thread when the engine is idle; true when it
  // finished the operation, else `body` finishes it (ProgressEngine::attempt_then_submit).
  using Attempt = std::function<bool(OfiTransport&)>;
  WorkHandle collective(const std::string& name, const std::string& detail, Body body, Attempt attempt = {});
  WorkHandle point_to_point(const std::string& name, int peer, uint32_t op_number, const std::string& detail, Body body);
  void check_peer(int peer, const char* what) const;
  uint32_t next_message_number(std::map<int, uint32_t>& counters, int peer);
  void open_segments();

  std::shared_ptr<Shared> shared_;
  std::shared_ptr<const std::vector<int>> members_;  // group rank -> world rank
  int rank_ = -1;
  uint32_t group_id_;
  std::shared_ptr<HostSegments> segments_;  // null: every collective uses the fabric
  std::atomic<uint32_t> next_op_{0};
  std::mutex p2p_mutex_;
  std::map<int, uint32_t> sends_to_, recvs_from_;  // point-to-point message counters per peer
};

}  // namespace dsx::comm::ofi
