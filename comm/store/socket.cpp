// TCP plumbing for the rendezvous store (see socket.h).
#include "comm/store/socket.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>

#include "dsx/error.h"

namespace dsx::comm {

Fd& Fd::operator=(Fd&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = other.release();
  }
  return *this;
}

Fd::~Fd() {
  if (fd_ >= 0) ::close(fd_);
}

int Fd::release() {
  int fd = fd_;
  fd_ = -1;
  return fd;
}

namespace {

struct AddrInfoList {
  addrinfo* head = nullptr;
  ~AddrInfoList() {
    if (head) freeaddrinfo(head);
  }
};

AddrInfoList resolve(const std::string& host, uint16_t port, bool passive) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = passive ? AI_PASSIVE : 0;
  AddrInfoList list;
  std::string service = std::to_string(port);
  int rc = getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, &list.head);
  if (rc != 0) {
    throw Error(ErrorKind::Comm, "cannot resolve '" + host + "': " + gai_strerror(rc) +
                                     " - check MASTER_ADDR (an IP address or a name this host can resolve)");
  }
  return list;
}

// The socket inode listening on `port`, from /proc/net/tcp and tcp6 (0 if not found).
unsigned long listening_inode(uint16_t port) {
  for (const char* table : {"/proc/net/tcp", "/proc/net/tcp6"}) {
    std::ifstream in(table);
    std::string line;
    std::getline(in, line);  // header
    while (std::getline(in, line)) {
      std::istringstream fields(line);
      std::string slot, local, remote, state, queues, timer, retrans, uid, timeout;
      unsigned long inode = 0;
      fields >> slot >> local >> remote >> state >> queues >> timer >> retrans >> uid >> timeout >> inode;
      auto colon = local.rfind(':');
      if (colon == std::string::npos || state != "0A") continue;  // 0A = LISTEN
      if (std::stoul(local.substr(colon + 1), nullptr, 16) == port) return inode;
    }
  }
  return 0;
}

// "pid 1234 (python3)" for the process holding a listening port, if /proc lets us see it.
std::string port_owner(uint16_t port) {
  unsigned long inode = listening_inode(port);
  if (inode == 0) return "";
  std::string target = "socket:[" + std::to_string(inode) + "]";
  DIR* proc = opendir("/proc");
  if (!proc) return "";
  std::string owner;
  while (dirent* entry = readdir(proc)) {
    if (!std::isdigit(static_cast<unsigned char>(entry->d_name[0]))) continue;
    std::string fd_dir = std::string("/proc/") + entry->d_name + "/fd";
    DIR* fds = opendir(fd_dir.c_str());
    if (!fds) continue;
    while (dirent* fd = readdir(fds)) {
      char link[64] = {};
      std::string path = fd_dir + "/" + fd->d_name;
      ssize_t n = readlink(path.c_str(), link, sizeof(link) - 1);
      if (n > 0 && target == std::string(link, static_cast<size_t>(n))) {
        std::ifstream comm(std::string("/proc/") + entry->d_name + "/comm");
        std::string name;
        std::getline(comm, name);
        owner = std::string("pid ") + entry->d_name + " (" + name + ")";
        break;
      }
    }
    closedir(fds);
    if (!owner.empty()) break;
  }
  closedir(proc);
  return owner;
}

int remaining_ms(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return static_cast<int>(std::clamp<long long>(left, 0, 1 << 30));
}

// Waits until fd is readable/writable or the deadline passes.
bool wait_fd(int fd, short events, Clock::time_point deadline) {
  for (;;) {
    pollfd p{fd, events, 0};
    int rc = ::poll(&p, 1, remaining_ms(deadline));
    if (rc > 0) return true;
    if (rc == 0) return false;
    if (errno != EINTR) return false;
  }
}

}  // namespace

Fd listen_tcp(const std::string& host, uint16_t port, int backlog) {
  AddrInfoList list = resolve(host, port, true);
  std::string where = host + ":" + std::to_string(port);
  int last_errno = 0;
  for (addrinfo* ai = list.head; ai; ai = ai->ai_next) {
    Fd fd(::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol));
    if (!fd) {
      last_errno = errno;
      continue;
    }
    int one = 1;
    setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (::bind(fd.get(), ai->ai_addr, ai->ai_addrlen) == 0 && ::listen(fd.get(), backlog) == 0) return fd;
    last_errno = errno;
  }
  if (last_errno == EADDRINUSE) {
    std::string owner = port_owner(port);
    throw Error(ErrorKind::Comm,
                "store: cannot listen on " + where + " (address already in use" +
                    (owner.empty() ? "" : " by " + owner) +
                    ") - another job or a leftover process owns the port; pick another MASTER_PORT "
                    "(--master_port) or find the owner with `ss -ltnp 'sport = :" +
                    std::to_string(port) + "'`");
  }
  if (last_errno == EADDRNOTAVAIL) {
    throw Error(ErrorKind::Comm, "store: cannot listen on " + where +
                                     " (not an address of this host) - rank 0 serves the store, so "
                                     "MASTER_ADDR must be an address of the host that runs rank 0");
  }
  throw Error(ErrorKind::Comm, "store: cannot listen on " + where + ": " + std::strerror(last_errno));
}

uint16_t local_port(int fd) {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return 0;
  if (addr.ss_family == AF_INET6) return ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port);
  return ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
}

Fd connect_tcp(const std::string& host, uint16_t port, Clock::time_point deadline) {
  std::string where = host + ":" + std::to_string(port);
  std::minstd_rand jitter(static_cast<unsigned>(::getpid()));
  auto backoff = std::chrono::milliseconds(10);
  int attempts = 0, last_errno = 0;
  auto start = Clock::now();
  do {
    ++attempts;
    AddrInfoList list = resolve(host, port, false);
    for (addrinfo* ai = list.head; ai; ai = ai->ai_next) {
      Fd fd(::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, ai->ai_protocol));
      if (!fd) {
        last_errno = errno;
        continue;
      }
      int rc = ::connect(fd.get(), ai->ai_addr, ai->ai_addrlen);
      if (rc != 0 && errno == EINPROGRESS) {
        if (wait_fd(fd.get(), POLLOUT, deadline)) {
          int err = 0;
          socklen_t len = sizeof(err);
          getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len);
          rc = err == 0 ? 0 : -1;
          errno = err;
        } else {
          errno = ETIMEDOUT;
        }
      }
      if (rc == 0) {
        int flags = fcntl(fd.get(), F_GETFL);
        fcntl(fd.get(), F_SETFL, flags & ~O_NONBLOCK);
        int one = 1;
        setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        setsockopt(fd.get(), SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
        return fd;
      }
      last_errno = errno;
    }
    auto sleep = std::min(backoff + std::chrono::milliseconds(jitter() % 10),
                          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()));
    if (sleep.count() > 0) std::this_thread::sleep_for(sleep);
    backoff = std::min(backoff * 2, std::chrono::milliseconds(1000));
  } while (Clock::now() < deadline);
  double waited = std::chrono::duration<double>(Clock::now() - start).count();
  std::ostringstream msg;
  msg.precision(3);
  msg << "cannot reach the rendezvous store at " << where << " after " << attempts << " attempts in "
      << waited << " s (last error: " << std::strerror(last_errno)
      << ") - check that rank 0 is running, that MASTER_ADDR is rank 0's address and MASTER_PORT its "
         "port, and that a firewall or security group lets this host reach that port";
  throw Error(ErrorKind::Timeout, msg.str());
}

void write_all(int fd, const void* data, size_t n, Clock::time_point deadline, const std::string& what) {
  auto* p = static_cast<const char*>(data);
  while (n > 0) {
    ssize_t rc = ::send(fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (rc > 0) {
      p += rc;
      n -= static_cast<size_t>(rc);
      continue;
    }
    if (rc < 0 && errno == EINTR) continue;
    if (rc < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (!wait_fd(fd, POLLOUT, deadline)) {
        throw Error(ErrorKind::Timeout, "timed out sending to " + what);
      }
      continue;
    }
    throw Error(ErrorKind::Comm, "lost the connection to " + what + " (" + std::strerror(errno) + ")");
  }
}

void read_all(int fd, void* data, size_t n, Clock::time_point deadline, const std::string& what) {
  auto* p = static_cast<char*>(data);
  while (n > 0) {
    ssize_t rc = ::recv(fd, p, n, MSG_DONTWAIT);
    if (rc > 0) {
      p += rc;
      n -= static_cast<size_t>(rc);
      continue;
    }
    if (rc == 0) throw Error(ErrorKind::Comm, what + " closed the connection");
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      if (!wait_fd(fd, POLLIN, deadline)) throw Error(ErrorKind::Timeout, "timed out waiting for " + what);
      continue;
    }
    throw Error(ErrorKind::Comm, "lost the connection to " + what + " (" + std::strerror(errno) + ")");
  }
}

}  // namespace dsx::comm
