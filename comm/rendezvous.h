// How the ranks of a job meet: read RANK / WORLD_SIZE / MASTER_ADDR / MASTER_PORT (as torchrun
// and the deepspeed launcher set them), start the store on rank 0, connect everyone, and wait
// until all ranks have joined, naming the ones that never came.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "comm/store/store.h"
#include "comm/store/store_server.h"
#include "dsx/master_port.h"

namespace dsx::comm {

struct RankEnv {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  StoreAddress master{"127.0.0.1", kDefaultMasterPort};
};

// Reads the rank environment. Throws Usage naming the variable that is missing or malformed.
RankEnv rank_env_from_environment();

// Default time to wait for every rank to join; DSX_STORE_TIMEOUT (seconds) overrides it.
std::chrono::milliseconds store_timeout_from_environment();

// store.get(key) for a key another rank publishes during set-up, failing at once (naming the
// rank) if a rank vanishes meanwhile instead of waiting out the whole timeout.
std::string get_from_peers(Store& store, const std::string& key, std::chrono::milliseconds timeout);

class Rendezvous {
 public:
  // Rank 0 starts the store server; every rank connects and waits for all `world_size` ranks.
  // Throws Timeout listing the ranks (and the hosts of those that came) after `timeout`.
  Rendezvous(const RankEnv& env, std::chrono::milliseconds timeout, std::string secret);
  ~Rendezvous();

  Store& store() { return *store_; }
  int rank() const { return env_.rank; }
  int world_size() const { return env_.world_size; }
  int local_rank() const { return env_.local_rank; }
  // Hostname of every rank, in rank order (how the ofi backend tells shm from tcp).
  const std::vector<std::string>& hosts() const { return hosts_; }

 private:
  RankEnv env_;
  std::unique_ptr<StoreServer> server_;
  std::unique_ptr<Store> store_;
  std::vector<std::string> hosts_;
};

}  // namespace dsx::comm
