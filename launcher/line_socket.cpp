// The sockets of line_socket.h (IPv4: the rendezvous endpoint is an address or a name of one).
#include "launcher/line_socket.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include "dsx/error.h"

namespace dsx::launcher {
namespace {

using Clock = std::chrono::steady_clock;

std::optional<sockaddr_in> resolve(const std::string& addr, int port) {
  addrinfo hints{}, *found = nullptr;
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  if (::getaddrinfo(addr.c_str(), nullptr, &hints, &found) != 0 || !found) return std::nullopt;
  sockaddr_in a = *reinterpret_cast<sockaddr_in*>(found->ai_addr);
  ::freeaddrinfo(found);
  a.sin_port = htons(static_cast<uint16_t>(port));
  return a;
}

}  // namespace

int listen_tcp(const std::string& addr, int port) {
  auto a = resolve(addr, port);
  if (!a) return -EADDRNOTAVAIL;
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -errno;
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&*a), sizeof *a) != 0 || ::listen(fd, 128) != 0) {
    int err = errno;
    ::close(fd);
    return -err;
  }
  return fd;
}

int bound_port(int fd) {
  sockaddr_in a{};
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  return ntohs(a.sin_port);
}

std::string local_address(int fd) {
  sockaddr_in a{};
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  char text[INET_ADDRSTRLEN] = {};
  ::inet_ntop(AF_INET, &a.sin_addr, text, sizeof text);
  return text;
}

int connect_tcp(const std::string& addr, int port, Clock::time_point deadline) {
  std::string last = "no address";
  while (true) {
    if (auto a = resolve(addr, port)) {
      int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      if (fd >= 0 && ::connect(fd, reinterpret_cast<sockaddr*>(&*a), sizeof *a) == 0) {
        int one = 1;
        ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        return fd;
      }
      last = std::strerror(errno);
      if (fd >= 0) ::close(fd);
    } else {
      last = "the name does not resolve";
    }
    if (Clock::now() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  throw Error(ErrorKind::Launch,
              "cannot reach the rendezvous at " + addr + ":" + std::to_string(port) + " (" + last +
                  "); start the node that hosts it, or check --rdzv_endpoint / --master_addr");
}

LineSocket::~LineSocket() {
  if (fd_ >= 0) ::close(fd_);
}

LineSocket& LineSocket::operator=(LineSocket&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = o.fd_;
    pending_ = std::move(o.pending_);
    o.fd_ = -1;
  }
  return *this;
}

bool LineSocket::send(const std::string& line) {
  const std::string text = line + "\n";
  size_t off = 0;
  while (off < text.size()) {
    ssize_t n = ::send(fd_, text.data() + off, text.size() - off, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    off += static_cast<size_t>(n);
  }
  return true;
}

bool LineSocket::read_available() {
  char buf[4096];
  while (true) {
    ssize_t n = ::recv(fd_, buf, sizeof buf, MSG_DONTWAIT);
    if (n > 0) {
      pending_.append(buf, static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
  }
}

std::string LineSocket::take_line() {
  const size_t nl = pending_.find('\n');
  std::string line = pending_.substr(0, nl);
  pending_.erase(0, nl + 1);
  return line;
}

std::optional<std::string> LineSocket::read_line(std::chrono::milliseconds timeout,
                                                 const std::string& what) {
  const auto deadline = Clock::now() + timeout;
  while (!has_line()) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) {
      throw Error(ErrorKind::Launch,
                  "no " + what + " within " + std::to_string(timeout.count() / 1000) + " s");
    }
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(std::min<long long>(left, 1000))) <= 0) continue;
    if (!read_available()) {
      if (!has_line()) return std::nullopt;
    }
  }
  return take_line();
}

}  // namespace dsx::launcher
