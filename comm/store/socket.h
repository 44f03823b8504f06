// Blocking TCP plumbing for the rendezvous store: listen, connect with retries, and whole-frame
// reads and writes that give up at a deadline. Every call that can wait takes a deadline; nothing
// here blocks forever.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace dsx::comm {

using Clock = std::chrono::steady_clock;

// Owns a file descriptor; closes it on destruction.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(Fd&& other) noexcept : fd_(other.release()) {}
  Fd& operator=(Fd&& other) noexcept;
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd();
  int get() const { return fd_; }
  int release();
  explicit operator bool() const { return fd_ >= 0; }

 private:
  int fd_ = -1;
};

// Listens on host:port (host is an address or a name of this machine; port 0 picks a free one).
// Throws dsx::Error(Comm) naming the address, and for EADDRINUSE the process holding the port
// when /proc tells.
Fd listen_tcp(const std::string& host, uint16_t port, int backlog);

// The port a listening socket is bound to.
uint16_t local_port(int fd);

// Connects to host:port, retrying with backoff until the deadline (the master may start later
// than its clients). Throws Timeout with the attempt count, the last errno and what to check.
Fd connect_tcp(const std::string& host, uint16_t port, Clock::time_point deadline);

// Writes / reads exactly n bytes or throws (Timeout at the deadline, Comm on EOF or reset).
// `what` names the peer for the message ("the store at 10.0.0.1:29500").
void write_all(int fd, const void* data, size_t n, Clock::time_point deadline, const std::string& what);
void read_all(int fd, void* data, size_t n, Clock::time_point deadline, const std::string& what);

}  // namespace dsx::comm
