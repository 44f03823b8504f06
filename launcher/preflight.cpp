// Pre-launch checks.
#include "launcher/preflight.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <sstream>

#include "dsx/error.h"
#include "launcher/env_export.h"
#include "launcher/process.h"
#include "launcher/rank_command.h"

namespace dsx::launcher {
namespace {

std::string bare_host(const std::string& host) {
  auto at = host.rfind('@');
  return at == std::string::npos ? host : host.substr(at + 1);
}

std::string trim_output(std::string text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r' || text.back() == ' ')) text.pop_back();
  for (auto& c : text)
    if (c == '\n') c = ' ';
  return text;
}

}  // namespace

bool have_program(const std::string& program) { return !resolve_program(program).empty(); }

void check_backend_installed(const std::string& launcher) {
  struct Need {
    const char* launcher;
    const char* program;
    const char* package;
  };
  static const Need needs[] = {
      {"pdsh", "pdsh", "pdsh (or use --launcher ssh: dsx's built-in ssh fan-out)"},
      {"ssh", "ssh", "openssh-client"},
      {"openmpi", "mpirun", "openmpi-bin"},
      {"mpich", "mpirun", "mpich"},
      {"impi", "mpirun", "Intel MPI (source its vars.sh)"},
      {"mvapich", "mpirun", "MVAPICH2"},
      {"slurm", "srun", "slurm-client (run inside a Slurm allocation)"},
  };
  for (const auto& n : needs) {
    if (launcher != n.launcher) continue;
    if (!have_program(n.program)) {
      throw Error(ErrorKind::Launch, "launcher '" + launcher + "' not installed: '" + n.program +
                                         "' is not on PATH. Install " + n.package + ".");
    }
    return;
  }
  throw Error(ErrorKind::Usage, "Unknown launcher " + launcher + " (choose pdsh, ssh, openmpi, mpich, impi, mvapich or slurm)");
}

void check_hosts_resolve(const World& world) {
  std::string bad;
  for (const auto& h : world) {
    addrinfo hints{};
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* result = nullptr;
    int rc = ::getaddrinfo(bare_host(h.host).c_str(), nullptr, &hints, &result);
    if (result) ::freeaddrinfo(result);
    if (rc != 0) bad += "\n  " + h.host + ": " + ::gai_strerror(rc);
  }
  if (!bad.empty()) {
    throw Error(ErrorKind::Launch, "these hosts do not resolve to an address:" + bad +
                                       "\nFix the names in the hostfile, /etc/hosts or DNS.");
  }
}

namespace {

// Reads a child's output until it ends or `deadline` passes (then kills it) and reaps it.
// Returns its wait status.
int collect_output(Child& child, std::chrono::steady_clock::time_point deadline, std::string& output) {
  if (child.exec_errno) throw Error(ErrorKind::Launch, std::string("cannot run ssh: ") + std::strerror(child.exec_errno));
  char buf[4096];
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
    pollfd fd{child.output_fd, POLLIN, 0};
    if (left <= 0 || ::poll(&fd, 1, static_cast<int>(left)) <= 0) {
      ::killpg(child.pid, SIGKILL);
      output += "(no answer in time)";
      break;
    }
    ssize_t n = ::read(child.output_fd, buf, sizeof buf);
    if (n <= 0) break;
    output.append(buf, n);
  }
  ::close(child.output_fd);
  int status = -1;
  ::waitpid(child.pid, &status, 0);
  return status;
}

}  // namespace

void check_ssh_reachable(const World& world, const std::vector<std::string>& ssh_options, int port,
                         const std::string& hostfile) {
  struct Probe {
    std::string host;
    Child child;
    std::string output;
    int status = -1;
  };
  std::vector<Probe> probes;
  for (const auto& h : world) {
    SpawnSpec spec;
    spec.argv = {"ssh", "-o", "PasswordAuthentication=no", "-o", "ConnectTimeout=10"};
    spec.argv.insert(spec.argv.end(), ssh_options.begin(), ssh_options.end());
    spec.argv.insert(spec.argv.end(), {h.host, "true"});
    spec.env = current_environment();
    probes.push_back({h.host, spawn_child(spec), "", -1});
  }
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  for (auto& p : probes) p.status = collect_output(p.child, deadline, p.output);
  std::string bad;
  for (const auto& p : probes) {
    if (WIFEXITED(p.status) && WEXITSTATUS(p.status) == 0) continue;
    bad += "\n  " + p.host + " port " + (port > 0 ? std::to_string(port) : std::string("22 (or ~/.ssh/config)")) +
           ": " + trim_output(p.output);
  }
  if (!bad.empty()) {
    throw Error(ErrorKind::Launch, "Using hostfile at " + hostfile + " but these hosts were not reachable via ssh:" + bad +
                                       "\nSet up passwordless ssh (key in ~/.ssh/authorized_keys), give --ssh_port, or "
                                       "for a single node remove the hostfile. --no_ssh_check skips this check.");
  }
}

std::string ask_master_addr(const std::string& host, const std::vector<std::string>& ssh_options) {
  SpawnSpec spec;
  spec.argv = {"ssh", "-o", "PasswordAuthentication=no", "-o", "ConnectTimeout=10"};
  spec.argv.insert(spec.argv.end(), ssh_options.begin(), ssh_options.end());
  spec.argv.insert(spec.argv.end(), {host, "hostname -I"});
  spec.env = current_environment();
  Child child = spawn_child(spec);
  std::string output;
  const int status = collect_output(child, std::chrono::steady_clock::now() + std::chrono::seconds(30), output);
  std::istringstream words(output);
  std::string first;
  words >> first;
  unsigned char probe[sizeof(in6_addr)];
  const bool address = ::inet_pton(AF_INET, first.c_str(), probe) == 1 || ::inet_pton(AF_INET6, first.c_str(), probe) == 1;
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || !address) {
    throw Error(ErrorKind::Launch, "cannot find the master address: asked " + host + " over ssh ('hostname -I'), "
                                   "as DeepSpeed does, and got: " + trim_output(output) + "; pass --master_addr");
  }
  return first;
}

bool is_loopback_host(const std::string& host) {
  const std::string name = bare_host(host);
  return name == "localhost" || name == "::1" || name.rfind("127.", 0) == 0;
}

std::string resolve_master_addr(const std::string& host) {
  std::string name = bare_host(host);
  if (name == "localhost") return "127.0.0.1";
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* result = nullptr;
  int rc = ::getaddrinfo(name.c_str(), nullptr, &hints, &result);
  if (rc != 0 || !result) {
    throw Error(ErrorKind::Launch, "cannot find the master address: host '" + host + "' does not resolve (" +
                                       ::gai_strerror(rc) + "); pass --master_addr");
  }
  std::string chosen;
  for (addrinfo* a = result; a; a = a->ai_next) {
    char text[INET6_ADDRSTRLEN] = {};
    if (a->ai_family == AF_INET) {
      ::inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(a->ai_addr)->sin_addr, text, sizeof text);
      chosen = text;
      break;
    }
    if (chosen.empty() && a->ai_family == AF_INET6) {
      ::inet_ntop(AF_INET6, &reinterpret_cast<sockaddr_in6*>(a->ai_addr)->sin6_addr, text, sizeof text);
      chosen = text;
    }
  }
  ::freeaddrinfo(result);
  return chosen;
}

void check_master_port_free(const std::string& addr, int port) {
  if (port <= 0 || port > 65535) {
    throw Error(ErrorKind::Usage, "--master_port " + std::to_string(port) + " is not a TCP port (1-65535)");
  }
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* result = nullptr;
  if (::getaddrinfo(addr.c_str(), std::to_string(port).c_str(), &hints, &result) != 0 || !result) return;
  int fd = ::socket(result->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  int rc = fd >= 0 ? ::bind(fd, result->ai_addr, result->ai_addrlen) : 0;
  int err = errno;
  if (fd >= 0) ::close(fd);
  ::freeaddrinfo(result);
  if (rc != 0 && err == EADDRINUSE) {
    throw Error(ErrorKind::Launch, "master port " + std::to_string(port) + " on " + addr +
                                       " is already in use (another job, or a previous run still exiting); "
                                       "pick a free one with --master_port");
  }
}

int pick_free_port(const std::string& addr) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* result = nullptr;
  if (::getaddrinfo(addr.c_str(), "0", &hints, &result) != 0 || !result) {
    throw Error(ErrorKind::Launch, "--master_port 0: cannot resolve the master address " + addr);
  }
  int fd = ::socket(result->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int port = 0;
  if (fd >= 0 && ::bind(fd, result->ai_addr, result->ai_addrlen) == 0) {
    sockaddr_storage bound{};
    socklen_t len = sizeof bound;
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &len);
    port = bound.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port)
                                        : ntohs(reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  }
  if (fd >= 0) ::close(fd);
  ::freeaddrinfo(result);
  if (port == 0) throw Error(ErrorKind::Launch, "--master_port 0: cannot bind a port on " + addr + "; give a port");
  return port;
}

}  // namespace dsx::launcher
