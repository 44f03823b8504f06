// The rendezvous store's server loop (see store_server.h).
#include "comm/store/store_server.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <iostream>
#include <optional>

#include "comm/store/protocol.h"
#include "comm/store/secret.h"
#include "dsx/error.h"

namespace dsx::comm {

namespace sp = store_protocol;

namespace {
constexpr auto kReplyTimeout = std::chrono::seconds(10);
}

struct StoreServer::Connection {
  Fd fd;
  Clock::time_point accepted = Clock::now();
  std::string inbox;
  std::string nonce;
  bool joined = false;
  bool said_bye = false;
  int rank = -1;
  sp::Role role = sp::Role::Helper;
};

StoreServer::StoreServer(const std::string& host, uint16_t port, int world_size, std::string secret,
                         StoreServerLimits limits)
    : world_size_(world_size), secret_(std::move(secret)), limits_(limits) {
  // A whole job may connect at once: its ranks never count against the cap of pending ones.
  limits_.pending_connections = std::max(limits_.pending_connections, 2 * static_cast<size_t>(world_size));
  // The backlog covers a whole job connecting at once (TCPStore warns when somaxconn is lower).
  listener_ = listen_tcp(host, port, std::max(128, 2 * world_size));
  port_ = local_port(listener_.get());
  if (::pipe2(wake_pipe_, O_CLOEXEC) != 0) {
    throw Error(ErrorKind::Internal, std::string("store: pipe failed: ") + std::strerror(errno));
  }
  thread_ = std::thread([this] { serve(); });
}

StoreServer::~StoreServer() {
  char stop = 1;
  (void)!::write(wake_pipe_[1], &stop, 1);
  if (thread_.joinable()) thread_.join();
  ::close(wake_pipe_[0]);
  ::close(wake_pipe_[1]);
}

bool StoreServer::wait_for_ranks_to_leave(Clock::time_point deadline) const {
  while (ranks_connected_.load() > 0) {
    if (Clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

void StoreServer::serve() {
  for (;;) {
    std::vector<pollfd> fds;
    fds.push_back({wake_pipe_[0], POLLIN, 0});
    fds.push_back({listener_.get(), POLLIN, 0});
    for (const auto& [fd, conn] : connections_) fds.push_back({fd, POLLIN, 0});
    int rc = ::poll(fds.data(), fds.size(), poll_timeout_ms());
    if (rc < 0 && errno != EINTR) {
      std::cerr << "dsx store: poll failed (" << std::strerror(errno) << "); the store stops serving\n";
      return;
    }
    if (fds[0].revents) return;  // destructor asked us to stop
    if (fds[1].revents & POLLIN) accept_one();
    for (size_t i = 2; i < fds.size(); ++i) {
      if (!fds[i].revents) continue;
      auto it = connections_.find(fds[i].fd);
      if (it != connections_.end() && !read_from(*it->second)) close_connection(fds[i].fd);
    }
    expire_waiters();
    drop_stale_pending();
  }
}

void StoreServer::accept_one() {
  int fd = ::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
  if (fd < 0) return;
  // At the cap of connections that have not joined, the oldest of them goes: a rank joins within
  // milliseconds of its hello, so the oldest pending one is the likeliest to be idle on purpose.
  std::vector<std::pair<Clock::time_point, int>> pending;
  for (const auto& [other_fd, other] : connections_) {
    if (!other->joined) pending.emplace_back(other->accepted, other_fd);
  }
  if (pending.size() >= limits_.pending_connections) {
    close_connection(std::min_element(pending.begin(), pending.end())->second);
  }
  auto conn = std::make_unique<Connection>();
  conn->fd = Fd(fd);
  conn->nonce = secret_.empty() ? std::string(sp::kNonceBytes, '\0') : make_nonce();
  std::string hello = sp::Writer()
                          .i32(static_cast<int32_t>(sp::kMagic))
                          .i32(sp::kVersion)
                          .u8(secret_.empty() ? 0 : 1)
                          .bytes(conn->nonce)
                          .frame();
  Connection& c = *conn;
  connections_[fd] = std::move(conn);
  if (!reply(c, hello)) close_connection(fd);
}

bool StoreServer::read_from(Connection& c) {
  // One read at a time, each followed by the frame checks: a frame too long for the connection
  // (4 KiB before a join) closes it after 64 KiB, not after the server has drained and held all
  // that a stranger streams. A few reads per turn, so no one sender can keep the others waiting;
  // poll() reports what is left.
  char buf[65536];
  for (int reads = 0; reads < 16; ++reads) {
    ssize_t n = ::recv(c.fd.get(), buf, sizeof(buf), MSG_DONTWAIT);
    if (n == 0) return false;
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno == EAGAIN || errno == EWOULDBLOCK;
    }
    c.inbox.append(buf, static_cast<size_t>(n));
    if (!take_frames(c)) return false;
  }
  return true;
}

bool StoreServer::take_frames(Connection& c) {
  while (c.inbox.size() >= 4) {
    uint32_t len;
    std::memcpy(&len, c.inbox.data(), 4);
    if (len > (c.joined ? sp::kMaxFrame : limits_.join_frame_bytes)) return false;  // before a join: small
    if (c.inbox.size() < 4 + size_t{len}) break;
    std::string body = c.inbox.substr(4, len);
    c.inbox.erase(0, 4 + size_t{len});
    try {
      if (!handle_frame(c, body)) return false;
    } catch (const Error&) {
      return false;  // malformed: not a dsx client
    }
  }
  return true;
}

bool StoreServer::handle_frame(Connection& c, const std::string& body) {
  return c.joined ? handle_request(c, body) : handle_join(c, body);
}

bool StoreServer::handle_join(Connection& c, const std::string& body) {
  sp::Reader in(body);
  auto magic = static_cast<uint32_t>(in.i32());
  int32_t version = in.i32();
  if (magic != sp::kMagic) return false;
  int32_t rank = in.i32();
  int32_t world = in.i32();
  auto role = static_cast<sp::Role>(in.u8());
  std::string proof = in.bytes();
  std::string refusal;
  if (version != sp::kVersion) {
    refusal = "protocol version " + std::to_string(version) + " does not match the server's " +
              std::to_string(sp::kVersion) + " - every rank must run the same dsx build";
  } else if (!secret_.empty() && !proofs_equal(proof, secret_proof(secret_, c.nonce))) {
    refusal = std::string("wrong or missing shared secret - this job's store requires ") + kStoreSecretEnv +
              " and every rank must get the same value from the launcher";
  } else if (secret_.empty() && !proof.empty()) {
    refusal = std::string("this rank has ") + kStoreSecretEnv +
              " set but the store was started without one - set it for every rank or for none";
  } else if (world != world_size_) {
    refusal = "world-size mismatch: this rank has WORLD_SIZE=" + std::to_string(world) +
              " but rank 0 serves a world of " + std::to_string(world_size_) +
              " - every rank must be started with the same WORLD_SIZE";
  } else if (rank < 0 || rank >= world_size_) {
    refusal = "rank " + std::to_string(rank) + " is outside the world of " + std::to_string(world_size_);
  } else if (role == sp::Role::Rank) {
    for (const auto& [fd, other] : connections_) {
      if (other->joined && other->role == sp::Role::Rank && other->rank == rank) {
        refusal = "duplicate rank: rank " + std::to_string(rank) +
                  " has already joined - two processes were given the same RANK";
      }
    }
  }
  if (!refusal.empty()) {
    reply(c, sp::Writer().u8(static_cast<uint8_t>(sp::Status::Rejected)).bytes(refusal).frame());
    return false;
  }
  c.joined = true;
  c.rank = rank;
  c.role = role;
  if (role == sp::Role::Rank) ++ranks_connected_;
  return reply(c, sp::Writer().u8(static_cast<uint8_t>(sp::Status::Ok)).bytes("").frame());
}

bool StoreServer::handle_request(Connection& c, const std::string& body) {
  sp::Reader in(body);
  auto op = static_cast<sp::Op>(in.u8());
  std::string key = in.bytes();
  sp::Writer out;
  switch (op) {
    case sp::Op::Set:
      data_[key] = in.bytes();
      out.u8(static_cast<uint8_t>(sp::Status::Ok));
      if (!reply(c, out.frame())) return false;
      wake_waiters(key);
      return true;
    case sp::Op::Get: {
      int64_t timeout_ms = in.i64();
      auto it = data_.find(key);
      if (it != data_.end()) return reply(c, out.u8(static_cast<uint8_t>(sp::Status::Ok)).bytes(it->second).frame());
      if (timeout_ms <= 0) return reply(c, out.u8(static_cast<uint8_t>(sp::Status::Timeout)).frame());
      waiters_.push_back({c.fd.get(), key, Clock::now() + std::chrono::milliseconds(timeout_ms)});
      return true;
    }
    case sp::Op::Add: {
      int64_t delta = in.i64();
      int64_t value = 0;
      auto it = data_.find(key);
      if (it != data_.end()) {
        try {
          value = std::stoll(it->second);
        } catch (const std::exception&) {
          return reply(c, out.u8(static_cast<uint8_t>(sp::Status::Rejected))
                              .bytes("key '" + key + "' holds bytes, not a counter")
                              .frame());
        }
      }
      value += delta;
      data_[key] = std::to_string(value);
      if (!reply(c, out.u8(static_cast<uint8_t>(sp::Status::Ok)).i64(value).frame())) return false;
      wake_waiters(key);
      return true;
    }
    case sp::Op::Check:
      return reply(c, out.u8(static_cast<uint8_t>(sp::Status::Ok)).u8(data_.count(key) ? 1 : 0).frame());
    case sp::Op::Delete:
      return reply(c, out.u8(static_cast<uint8_t>(sp::Status::Ok)).u8(data_.erase(key) ? 1 : 0).frame());
    case sp::Op::Bye:
      c.said_bye = true;
      return reply(c, out.u8(static_cast<uint8_t>(sp::Status::Ok)).frame());
  }
  return false;
}

bool StoreServer::reply(Connection& c, const std::string& frame) {
  try {
    write_all(c.fd.get(), frame.data(), frame.size(), Clock::now() + kReplyTimeout, "a store client");
    return true;
  } catch (const Error&) {
    return false;
  }
}

void StoreServer::close_connection(int fd) {
  auto it = connections_.find(fd);
  if (it == connections_.end()) return;
  Connection& c = *it->second;
  const bool was_rank = c.joined && c.role == sp::Role::Rank;
  const bool vanished = was_rank && !c.said_bye;
  if (was_rank) --ranks_connected_;
  int rank = c.rank;
  std::erase_if(waiters_, [fd](const Waiter& w) { return w.conn == fd; });
  connections_.erase(it);
  if (vanished) {
    std::string& dead = data_[sp::kDeadRanksKey];
    if (!dead.empty()) dead += ',';
    dead += std::to_string(rank);
    wake_waiters(sp::kDeadRanksKey);
  }
}

void StoreServer::wake_waiters(const std::string& key) {
  auto it = data_.find(key);
  if (it == data_.end()) return;
  std::vector<int> gone;
  std::erase_if(waiters_, [&](const Waiter& w) {
    if (w.key != key) return false;
    auto conn = connections_.find(w.conn);
    if (conn != connections_.end() &&
        !reply(*conn->second, sp::Writer().u8(static_cast<uint8_t>(sp::Status::Ok)).bytes(it->second).frame())) {
      gone.push_back(w.conn);
    }
    return true;
  });
  for (int fd : gone) close_connection(fd);
}

void StoreServer::expire_waiters() {
  auto now = Clock::now();
  std::vector<int> gone;
  std::erase_if(waiters_, [&](const Waiter& w) {
    if (w.deadline > now) return false;
    auto conn = connections_.find(w.conn);
    if (conn != connections_.end() &&
        !reply(*conn->second, sp::Writer().u8(static_cast<uint8_t>(sp::Status::Timeout)).frame())) {
      gone.push_back(w.conn);
    }
    return true;
  });
  for (int fd : gone) close_connection(fd);
}

void StoreServer::drop_stale_pending() {
  const auto now = Clock::now();
  std::vector<int> stale;
  for (const auto& [fd, c] : connections_) {
    if (!c->joined && now - c->accepted > limits_.join_timeout) stale.push_back(fd);
  }
  for (int fd : stale) close_connection(fd);
}

int StoreServer::poll_timeout_ms() const {
  std::optional<Clock::time_point> next;
  for (const Waiter& w : waiters_) {
    if (!next || w.deadline < *next) next = w.deadline;
  }
  for (const auto& [fd, c] : connections_) {
    const auto limit = c->accepted + limits_.join_timeout;
    if (!c->joined && (!next || limit < *next)) next = limit;
  }
  if (!next) return -1;
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(*next - Clock::now()).count() + 1;
  return static_cast<int>(std::clamp<long long>(ms, 0, 1 << 30));
}

}  // namespace dsx::comm
