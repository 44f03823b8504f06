// The rendezvous of `dsx torchrun`: one agent per node meets the others here, learns the world,
// and hears when the job must stop or restart. dsx's own small TCP store, served by one agent
// (static: node 0 at --master_addr:--master_port; c10d: the agent that can bind
// --rdzv_endpoint) on a thread of its own. The protocol, one line each way:
//
//   agent:  JOIN <run_id> <attempt> <nproc> <node_rank|-1> <address> <free port>
//   store:  WORLD <group_rank> <attempt> <master address> <master port> <addr:nproc,addr:nproc,...>
//           once --nnodes agents joined this attempt (else STOP after join_timeout)
//   agent:  SUCCEEDED <attempt> | FAILED <attempt> <exit code> <why> | ABORT <exit code> <why>
//   store:  DONE (every node succeeded) | RESTART <attempt+1> <why> (a node failed and restarts are
//           left) | STOP <exit code> <why> (none left, an ABORT, or the rendezvous timed out)
//
// A connection that closes without SUCCEEDED or ABORT is a node lost: a failure like any other.
// Elastic membership (--nnodes MIN:MAX, min_nodes < nnodes): as torchrun's c10d, the first world
// forms with MAX nodes, or once MIN joined and the last call (last_call_timeout after the MIN-th
// join) has passed; a restart re-forms as soon as every node still connected is back, or with the
// MIN or more there are at the join timeout (torchrun: at the last call there too). A node whose ranks failed twice is told STOP (left out); a node that
// joins while the world runs waits and joins at the next restart.
// Group ranks: static by --node_rank; c10d by address, then by arrival (torchrun sorts by host).
// The ranks' MASTER_ADDR:MASTER_PORT is group rank 0's address and the free port it offered.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>

namespace dsx::launcher {

struct RendezvousRules {
  std::string run_id;
  int nnodes = 1;     // MAX
  int min_nodes = 1;  // MIN; == nnodes for a fixed node count
  int max_restarts = 0;
  bool by_node_rank = false;  // static backend: GROUP_RANK = --node_rank
  std::chrono::seconds join_timeout{600};
  std::chrono::seconds last_call_timeout{30};
};

class RendezvousServer {
 public:
  // Serves on `listen_fd` (from listen_tcp) until the job ends or the object is destroyed.
  RendezvousServer(int listen_fd, const RendezvousRules& rules);
  ~RendezvousServer();
  RendezvousServer(const RendezvousServer&) = delete;
  RendezvousServer& operator=(const RendezvousServer&) = delete;

  int port() const { return port_; }
  // Waits (at most `timeout`) until every agent has heard the end of the job; false if not yet.
  bool wait_finished(std::chrono::milliseconds timeout);

 private:
  struct State;
  void serve();

  int listen_fd_;
  int port_;
  std::unique_ptr<State> state_;
  std::atomic<bool> quit_{false};
  std::atomic<bool> finished_{false};
  std::thread thread_;
};

}  // namespace dsx::launcher
