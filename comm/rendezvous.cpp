// Rendezvous through the store (see rendezvous.h).
#include "comm/rendezvous.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <exception>
#include <sstream>
#include <thread>

#include "dsx/error.h"

namespace dsx::comm {

namespace {

// How long a failing rank 0 keeps its store up for ranks still connected: they poll it every
// 200 ms while waiting (progress_engine.cpp), so a few seconds is ample even on a loaded machine.
constexpr auto kFailingStoreLinger = std::chrono::seconds(5);

long env_integer(const char* name, const char* fallback, long lo, long hi) {
  const char* raw = std::getenv(name);
  if (!raw && !fallback) {
    throw Error(ErrorKind::Usage, std::string(name) + " is not set - start the ranks with `dsx launch` or set "
                                  "RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT for every process");
  }
  std::string text = raw ? raw : fallback;
  char* end = nullptr;
  long value = std::strtol(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || value < lo || value > hi) {
    throw Error(ErrorKind::Usage, std::string(name) + "='" + text + "' is not an integer in [" + std::to_string(lo) +
                                      ", " + std::to_string(hi) + "]");
  }
  return value;
}

std::string this_host() {
  char name[256] = {};
  gethostname(name, sizeof(name) - 1);
  return name;
}

}  // namespace

RankEnv rank_env_from_environment() {
  RankEnv env;
  env.world_size = static_cast<int>(env_integer("WORLD_SIZE", nullptr, 1, 1 << 20));
  env.rank = static_cast<int>(env_integer("RANK", nullptr, 0, env.world_size - 1));
  env.local_rank = static_cast<int>(env_integer("LOCAL_RANK", "0", 0, 1 << 20));
  const char* addr = std::getenv("MASTER_ADDR");
  if (env.world_size > 1 && (!addr || !*addr)) {
    throw Error(ErrorKind::Usage, "MASTER_ADDR is not set - set it to rank 0's address (127.0.0.1 on one host)");
  }
  env.master.host = addr && *addr ? addr : "127.0.0.1";
  const std::string one_rank_port = std::to_string(kDefaultMasterPort);
  env.master.port = static_cast<uint16_t>(
      env_integer("MASTER_PORT", env.world_size > 1 ? nullptr : one_rank_port.c_str(), 1, 65535));
  return env;
}

std::chrono::milliseconds store_timeout_from_environment() {
  return std::chrono::seconds(env_integer("DSX_STORE_TIMEOUT", "300", 1, 86400));
}

std::string get_from_peers(Store& store, const std::string& key, std::chrono::milliseconds timeout) {
  auto deadline = Clock::now() + timeout;
  for (;;) {
    auto slice = std::min<std::chrono::milliseconds>(
        std::chrono::milliseconds(250), std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()));
    try {
      return store.get(key, std::max(slice, std::chrono::milliseconds(1)));
    } catch (const Error& e) {
      if (e.kind() != ErrorKind::Timeout) throw;
    }
    if (auto dead = store.try_get(store_protocol::kDeadRanksKey)) {
      throw Error(ErrorKind::Comm, "rank " + std::to_string(store.rank()) + ": rank(s) " + *dead +
                                       " exited during set-up, before publishing '" + key + "' - see that rank's error");
    }
    if (Clock::now() >= deadline) return store.get(key, std::chrono::milliseconds(1));  // throws the Timeout
  }
}

Rendezvous::Rendezvous(const RankEnv& env, std::chrono::milliseconds timeout, std::string secret) : env_(env) {
  if (env.rank == 0) server_ = std::make_unique<StoreServer>(env.master.host, env.master.port, env.world_size, secret);
  StoreIdentity me{env.rank, env.world_size, std::move(secret)};
  StoreAddress address = env.master;
  if (server_ && address.port == 0) address.port = server_->port();  // a lone rank on any free port
  store_ = std::make_unique<Store>(address, me, timeout);

  // Join: publish our host, count in; the last to arrive opens the door for everyone.
  const std::string prefix = "dsx/join/";
  store_->set(prefix + "host/" + std::to_string(env.rank), this_host());
  if (store_->add(prefix + "count", 1) == env.world_size) store_->set(prefix + "done", "1");
  try {
    store_->get(prefix + "done", timeout);
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::Timeout) throw;
    std::ostringstream missing;
    int arrived = 0;
    for (int r = 0; r < env.world_size; ++r) {
      if (store_->check(prefix + "host/" + std::to_string(r))) {
        ++arrived;
      } else {
        missing << (missing.tellp() > 0 ? ", " : "") << r;
      }
    }
    throw Error(ErrorKind::Timeout,
                "rank " + std::to_string(env.rank) + ": timed out after " + std::to_string(timeout.count() / 1000) +
                    " s waiting for all ranks to join the store at " + env.master.to_string() + "; " +
                    std::to_string(arrived) + "/" + std::to_string(env.world_size) + " joined, missing rank(s) " +
                    missing.str() + " - check that those processes started and have the same MASTER_ADDR/PORT "
                                    "(raise DSX_STORE_TIMEOUT if they start slowly)");
  }
  hosts_.resize(static_cast<size_t>(env.world_size));
  for (int r = 0; r < env.world_size; ++r) hosts_[static_cast<size_t>(r)] = store_->get(prefix + "host/" + std::to_string(r), timeout);
}

Rendezvous::~Rendezvous() {
  // Rank 0's server must outlive the other ranks' last requests: wait (bounded) until every rank
  // has said it is leaving before the server goes away.
  if (std::uncaught_exceptions() > 0) {
    // This rank is failing, often because a peer died. Its store stays up a little longer while
    // other ranks are connected: they ask it which rank died (within kHealthInterval of the
    // death), and without it they could only report that rank 0 left.
    store_.reset();  // no goodbye: the others see this rank leave as failing
    if (server_) server_->wait_for_ranks_to_leave(Clock::now() + kFailingStoreLinger);
    return;
  }
  try {
    store_->add("dsx/leave/count", 1);
    if (server_) {
      auto deadline = Clock::now() + std::chrono::seconds(30);
      while (Clock::now() < deadline) {
        auto left = store_->try_get("dsx/leave/count");
        auto dead = store_->try_get(store_protocol::kDeadRanksKey);
        long gone = left ? std::stol(*left) : 0;
        if (dead) gone += 1 + static_cast<long>(std::count(dead->begin(), dead->end(), ','));
        if (gone >= env_.world_size) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
    }
  } catch (const std::exception&) {
    // Shutting down after a failure: nobody to wait for.
  }
  store_.reset();
  server_.reset();
}

}  // namespace dsx::comm
