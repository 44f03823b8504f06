// What a rank opens to talk to the others: the rendezvous (rank 0 serves the store) and the
// world communicator of the chosen backend, torn down in the right order (the communicator
// first: it still uses the store while it closes).
//
//   dsx::comm::Session session(dsx::comm::rank_env_from_environment(),
//                              dsx::comm::comm_options_from_environment());
//   session.world().allreduce(grads, n, DType::F32, ReduceOp::Avg)->wait();
#pragma once

#include <memory>

#include "comm/communicator.h"
#include "comm/rendezvous.h"

namespace dsx::comm {

// The world communicator over `rv` for options.backend ("ofi", "nccl" or "auto": nccl in a CUDA
// build on a machine with a GPU, ofi otherwise). `rv` must outlive it.
std::unique_ptr<Communicator> make_communicator(Rendezvous& rv, const CommOptions& options);

class Session {
 public:
  Session(const RankEnv& env, const CommOptions& options);
  ~Session();
  Communicator& world() { return *world_; }
  Rendezvous& rendezvous() { return *rendezvous_; }

 private:
  std::unique_ptr<Rendezvous> rendezvous_;
  std::unique_ptr<Communicator> world_;
};

}  // namespace dsx::comm
