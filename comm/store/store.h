// A client of the rendezvous store (store_server.h): set / get / add / check / wait on keys, each
// with a deadline. One TCP connection per Store; calls are serialised by a mutex, so threads may
// share one, but a second connection (helper()) keeps a long wait from blocking another thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "comm/store/protocol.h"
#include "comm/store/socket.h"

namespace dsx::comm {

struct StoreAddress {
  std::string host;  // MASTER_ADDR
  uint16_t port = 0; // MASTER_PORT
  std::string to_string() const { return host + ":" + std::to_string(port); }
};

struct StoreIdentity {
  int rank = 0;
  int world_size = 1;
  std::string secret;  // "" = the store has no secret
};

class Store {
 public:
  // Connects (retrying until connect_timeout: the server may start later) and joins.
  // Throws Comm with the server's reason when it refuses us (secret, world size, duplicate rank).
  Store(StoreAddress address, StoreIdentity identity, std::chrono::milliseconds connect_timeout,
        store_protocol::Role role = store_protocol::Role::Rank);
  ~Store();  // says goodbye (unless an exception is unwinding), so the server does not report
             // this rank as vanished
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  void set(const std::string& key, const std::string& value);
  // Waits up to `timeout` for the key to exist; throws Timeout naming the key.
  std::string get(const std::string& key, std::chrono::milliseconds timeout);
  std::optional<std::string> try_get(const std::string& key);
  int64_t add(const std::string& key, int64_t delta);
  bool check(const std::string& key);
  bool remove(const std::string& key);
  // Waits until every key exists; the timeout covers all of them together.
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout);

  // Another connection to the same store for another thread (it never counts as a rank).
  std::unique_ptr<Store> helper() const;

  const StoreAddress& address() const { return address_; }
  int rank() const { return identity_.rank; }
  int world_size() const { return identity_.world_size; }

 private:
  std::string request(const std::string& frame, Clock::time_point deadline);
  std::string describe() const;

  StoreAddress address_;
  StoreIdentity identity_;
  std::chrono::milliseconds connect_timeout_;
  store_protocol::Role role_;
  std::mutex mutex_;
  Fd fd_;
};

}  // namespace dsx::comm
