// Checks before a launch starts anything, each failing with a message that names the host, port
// or tool: the backend's binary is installed, every host name resolves, every host answers ssh
// (probed in parallel, with a timeout), the master port is free, and the master address.
#pragma once

#include <string>
#include <vector>

#include "launcher/world.h"

namespace dsx::launcher {

// True when `program` is an executable on PATH.
bool have_program(const std::string& program);

// Throws dsx::Error(Launch) "launcher 'X' not installed" naming the package to install.
void check_backend_installed(const std::string& launcher);

// Throws naming every host whose name does not resolve (user@ prefixes are ignored).
void check_hosts_resolve(const World& world);

// Runs `ssh <options> <host> true` for every host in parallel (BatchMode, ConnectTimeout) and
// throws naming each unreachable host, the port and ssh's own message.
void check_ssh_reachable(const World& world, const std::vector<std::string>& ssh_options, int port,
                         const std::string& hostfile);

// The address ranks use to reach node 0 when --master_addr is not given: its name resolved
// here (IPv4 preferred). Throws asking for --master_addr when it does not resolve.
std::string resolve_master_addr(const std::string& host);

// Node 0's address as node 0 itself gives it: its first `hostname -I` address, asked over ssh (as
// DeepSpeed's runner does), so that a name this machine maps to a loopback address (Debian's
// 127.0.1.1 for its own hostname) never becomes a multi-node MASTER_ADDR. Throws asking for
// --master_addr when it gets no address within 30 s.
std::string ask_master_addr(const std::string& host, const std::vector<std::string>& ssh_options);

// localhost, ::1 or 127.x: a "node" on this very machine.
bool is_loopback_host(const std::string& host);

// Throws when `port` is already bound on `addr` and `addr` belongs to this machine (a remote
// master cannot be checked from here and is skipped).
void check_master_port_free(const std::string& addr, int port);

// A port that is free on `addr` (a local address) right now, for --master_port 0.
int pick_free_port(const std::string& addr);

}  // namespace dsx::launcher
