// Text lines over TCP, with timeouts: what the torchrun-style rendezvous (rendezvous_server.h)
// speaks. One request or reply per line; nothing here blocks without a deadline.
#pragma once

#include <chrono>
#include <optional>
#include <string>

namespace dsx::launcher {

// A listening socket on addr:port (port 0: any free one). Returns the fd, or -errno.
int listen_tcp(const std::string& addr, int port);

// The port a socket is bound to, and the local address of a connected one.
int bound_port(int fd);
std::string local_address(int fd);

// Connects to addr:port, retrying until `deadline` (the host may not listen yet). Throws
// dsx::Error(Launch) naming the endpoint when it gives up.
int connect_tcp(const std::string& addr, int port, std::chrono::steady_clock::time_point deadline);

// A connected socket that hands out whole lines.
class LineSocket {
 public:
  explicit LineSocket(int fd = -1) : fd_(fd) {}
  ~LineSocket();
  LineSocket(LineSocket&& o) noexcept : fd_(o.fd_), pending_(std::move(o.pending_)) { o.fd_ = -1; }
  LineSocket& operator=(LineSocket&& o) noexcept;
  LineSocket(const LineSocket&) = delete;
  LineSocket& operator=(const LineSocket&) = delete;

  int fd() const { return fd_; }
  // False when the peer is gone.
  bool send(const std::string& line);
  // The next line (without '\n'); nullopt when the peer closed. Throws dsx::Error(Launch) at
  // `timeout`, naming `what` it waited for.
  std::optional<std::string> read_line(std::chrono::milliseconds timeout, const std::string& what);
  // Reads what has arrived without waiting (take the lines with take_line). False once closed.
  bool read_available();
  bool has_line() const { return pending_.find('\n') != std::string::npos; }
  std::string take_line();

 private:
  int fd_ = -1;
  std::string pending_;
};

}  // namespace dsx::launcher
