// The rendezvous store's server: a key -> bytes map that rank 0 serves at MASTER_ADDR:MASTER_PORT
// (as torchrun's TCPStore). One thread polls every connection; a GET for a missing key is parked
// until a SET or ADD creates it or its timeout passes, when the server itself answers Timeout, so
// the byte stream never goes out of step. It checks every joining client's protocol version,
// world size, rank and (when on) shared secret, and publishes ranks that vanish without saying
// goodbye under store_protocol::kDeadRanksKey.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "comm/store/socket.h"

namespace dsx::comm {

// What a connection may do before it has joined (proved the secret): nothing that costs the
// server much, so that a stranger on the network cannot exhaust rank 0's memory or crowd out
// the job's ranks.
struct StoreServerLimits {
  size_t join_frame_bytes = 4096;                 // a join is ~100 bytes
  std::chrono::milliseconds join_timeout{10000};  // a rank joins right after the hello
  size_t pending_connections = 256;  // (at least 2 x world) then the oldest pending is dropped
};

class StoreServer {
 public:
  // Listens on host:port (port 0: any free port, see port()). `secret` "" = no secret.
  StoreServer(const std::string& host, uint16_t port, int world_size, std::string secret,
              StoreServerLimits limits = {});
  ~StoreServer();
  StoreServer(const StoreServer&) = delete;
  StoreServer& operator=(const StoreServer&) = delete;

  uint16_t port() const { return port_; }

  // Keeps serving until no rank is connected any more (each has said goodbye or gone) or until
  // `deadline`; false if ranks were still connected then. Rank 0 calls it when it fails, so the
  // other ranks can still ask the store which rank died instead of hearing only that rank 0 left.
  bool wait_for_ranks_to_leave(Clock::time_point deadline) const;

 private:
  struct Connection;
  struct Waiter {
    int conn;
    std::string key;
    Clock::time_point deadline;
  };

  void serve();
  void accept_one();
  bool read_from(Connection& c);    // false: the connection is gone
  bool take_frames(Connection& c);  // handles the whole frames in c.inbox; false: close it
  bool handle_frame(Connection& c, const std::string& body);
  bool handle_join(Connection& c, const std::string& body);
  bool handle_request(Connection& c, const std::string& body);
  bool reply(Connection& c, const std::string& frame);
  void close_connection(int fd);
  void wake_waiters(const std::string& key);
  void expire_waiters();
  void drop_stale_pending();  // unjoined connections past the join timeout
  int poll_timeout_ms() const;

  Fd listener_;
  uint16_t port_ = 0;
  int world_size_;
  std::string secret_;
  StoreServerLimits limits_;
  int wake_pipe_[2] = {-1, -1};
  std::map<int, std::unique_ptr<Connection>> connections_;  // by fd
  std::map<std::string, std::string> data_;
  std::vector<Waiter> waiters_;
  std::atomic<int> ranks_connected_{0};  // joined Rank connections, for wait_for_ranks_to_leave
  std::thread thread_;
};

}  // namespace dsx::comm
