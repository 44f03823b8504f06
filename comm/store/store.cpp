// The rendezvous store's client (see store.h).
#include "comm/store/store.h"

#include <exception>
#include <memory>

#include "comm/store/secret.h"
#include "dsx/error.h"

namespace dsx::comm {

namespace sp = store_protocol;

namespace {
// How long a quick request (set, add, check) may take before the store counts as hung.
constexpr auto kRequestTimeout = std::chrono::seconds(60);
// Slack on a blocking get: the server answers Timeout itself at the deadline.
constexpr auto kReplySlack = std::chrono::seconds(30);

std::string seconds(std::chrono::milliseconds ms) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.3g s", ms.count() / 1000.0);
  return buf;
}

// The reply to Check and Delete: a status, then 1 when the key was there.
bool key_was_there(const std::string& body) {
  sp::Reader in(body);
  in.u8();
  return in.u8() != 0;
}

}  // namespace

Store::Store(StoreAddress address, StoreIdentity identity, std::chrono::milliseconds connect_timeout,
             sp::Role role)
    : address_(std::move(address)), identity_(std::move(identity)), connect_timeout_(connect_timeout), role_(role) {
  auto deadline = Clock::now() + connect_timeout;
  fd_ = connect_tcp(address_.host, address_.port, deadline);
  std::string what = "the rendezvous store at " + address_.to_string();
  uint32_t len = 0;
  read_all(fd_.get(), &len, 4, deadline, what);
  if (len > 1024) {
    throw Error(ErrorKind::Comm, address_.to_string() + " is not a dsx rendezvous store (is another program "
                                 "listening on MASTER_PORT?)");
  }
  std::string hello(len, '\0');
  read_all(fd_.get(), hello.data(), len, deadline, what);
  sp::Reader in(hello);
  if (static_cast<uint32_t>(in.i32()) != sp::kMagic) {
    throw Error(ErrorKind::Comm, address_.to_string() + " is not a dsx rendezvous store (is another program "
                                 "listening on MASTER_PORT?)");
  }
  in.i32();  // server version: the server judges compatibility
  bool secret_required = in.u8() != 0;
  std::string nonce = in.bytes();
  if (secret_required && identity_.secret.empty()) {
    throw Error(ErrorKind::Comm, std::string("the rendezvous store at ") + address_.to_string() +
                                     " requires a shared secret but " + kStoreSecretEnv +
                                     " is not set for this rank - start every rank through the same launcher");
  }
  std::string proof = identity_.secret.empty() ? std::string() : secret_proof(identity_.secret, nonce);
  std::string join = sp::Writer()
                         .i32(static_cast<int32_t>(sp::kMagic))
                         .i32(sp::kVersion)
                         .i32(identity_.rank)
                         .i32(identity_.world_size)
                         .u8(static_cast<uint8_t>(role))
                         .bytes(proof)
                         .frame();
  std::string answer = request(join, deadline);
  sp::Reader reply(answer);
  if (static_cast<sp::Status>(reply.u8()) != sp::Status::Ok) {
    throw Error(ErrorKind::Comm, "rank " + std::to_string(identity_.rank) + ": the rendezvous store at " +
                                     address_.to_string() + " refused to let us join: " + reply.bytes());
  }
}

Store::~Store() {
  // No goodbye while an error unwinds: this rank is failing, and the others should hear so
  // (the server publishes ranks that leave without one).
  if (!fd_ || std::uncaught_exceptions() > 0) return;
  try {
    request(sp::Writer().u8(static_cast<uint8_t>(sp::Op::Bye)).bytes("").frame(), Clock::now() + std::chrono::seconds(5));
  } catch (const Error&) {
    // The server is gone already; nothing to say goodbye to.
  }
}

std::string Store::describe() const {
  return "rank " + std::to_string(identity_.rank) + ", store " + address_.to_string();
}

// One request and its reply. After a failure the connection is closed, and every later request
// fails at once.
std::string Store::request(const std::string& frame, Clock::time_point deadline) {
  if (!fd_)
    throw Error(ErrorKind::Comm, describe() + ": the connection to the store was lost earlier");
  std::string what = "the rendezvous store at " + address_.to_string() + " (rank 0)";
  try {
    write_all(fd_.get(), frame.data(), frame.size(), deadline, what);
    uint32_t len = 0;
    read_all(fd_.get(), &len, 4, deadline, what);
    if (len > sp::kMaxFrame) throw Error(ErrorKind::Comm, what + " sent a malformed reply");
    std::string body(len, '\0');
    read_all(fd_.get(), body.data(), len, deadline, what);
    return body;
  } catch (const Error& e) {
    // The stream is out of step after a failure; no later request may reuse it.
    fd_ = Fd();
    if (e.kind() == ErrorKind::Comm) {
      throw Error(ErrorKind::Comm, std::string(e.what()) + " - rank 0 exited or the network failed; check "
                                                           "rank 0's log");
    }
    throw;
  }
}

void Store::set(const std::string& key, const std::string& value) {
  std::lock_guard lock(mutex_);
  request(sp::Writer().u8(static_cast<uint8_t>(sp::Op::Set)).bytes(key).bytes(value).frame(),
          Clock::now() + kRequestTimeout);
}

std::string Store::get(const std::string& key, std::chrono::milliseconds timeout) {
  std::lock_guard lock(mutex_);
  std::string body = request(
      sp::Writer().u8(static_cast<uint8_t>(sp::Op::Get)).bytes(key).i64(std::max<int64_t>(1, timeout.count())).frame(),
      Clock::now() + timeout + kReplySlack);
  sp::Reader in(body);
  if (static_cast<sp::Status>(in.u8()) == sp::Status::Timeout) {
    throw Error(ErrorKind::Timeout, describe() + ": timed out after " + seconds(timeout) + " waiting for key '" +
                                        key + "'");
  }
  return in.bytes();
}

std::optional<std::string> Store::try_get(const std::string& key) {
  std::lock_guard lock(mutex_);
  std::string body = request(sp::Writer().u8(static_cast<uint8_t>(sp::Op::Get)).bytes(key).i64(0).frame(),
                             Clock::now() + kRequestTimeout);
  sp::Reader in(body);
  if (static_cast<sp::Status>(in.u8()) != sp::Status::Ok) return std::nullopt;
  return in.bytes();
}

int64_t Store::add(const std::string& key, int64_t delta) {
  std::lock_guard lock(mutex_);
  std::string body = request(sp::Writer().u8(static_cast<uint8_t>(sp::Op::Add)).bytes(key).i64(delta).frame(),
                             Clock::now() + kRequestTimeout);
  sp::Reader in(body);
  if (static_cast<sp::Status>(in.u8()) != sp::Status::Ok) throw Error(ErrorKind::Comm, describe() + ": " + in.bytes());
  return in.i64();
}

bool Store::check(const std::string& key) {
  std::lock_guard lock(mutex_);
  return key_was_there(
      request(sp::Writer().u8(static_cast<uint8_t>(sp::Op::Check)).bytes(key).frame(),
              Clock::now() + kRequestTimeout));
}

bool Store::remove(const std::string& key) {
  std::lock_guard lock(mutex_);
  return key_was_there(
      request(sp::Writer().u8(static_cast<uint8_t>(sp::Op::Delete)).bytes(key).frame(),
              Clock::now() + kRequestTimeout));
}

void Store::wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  auto deadline = Clock::now() + timeout;
  for (const auto& key : keys) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0 && !check(key)) {
      throw Error(ErrorKind::Timeout, describe() + ": timed out after " + seconds(timeout) + " waiting for key '" +
                                          key + "'");
    }
    if (left.count() > 0) get(key, left);
  }
}

std::unique_ptr<Store> Store::helper() const {
  return std::make_unique<Store>(address_, identity_, connect_timeout_, sp::Role::Helper);
}

}  // namespace dsx::comm
