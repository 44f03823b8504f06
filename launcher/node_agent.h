// The per-node agent: the part of a launch that runs on every node (DeepSpeed's
// `python -m deepspeed.launcher.launch`, with the same flags). It starts one process per slot
// of its node with the rank environment, binds cores, writes per-rank logs, and supervises them.
// On a remote node it is tethered to the runner: when the runner's connection closes, the
// node's ranks are stopped instead of being left to hang in a collective.
#pragma once

#include <string>
#include <vector>

#include "dsx/master_port.h"
#include "launcher/rank_command.h"
#include "launcher/rank_env.h"
#include "launcher/supervisor.h"
#include "launcher/world.h"

namespace dsx::launcher {

struct AgentOptions {
  World world;
  int node_rank = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = kDefaultMasterPort;
  ProgramSpec program;
  std::string each_rank_log = "None";  // a directory, or "None"
  bool bind_cores_to_rank = false;
  std::string bind_core_list;          // "" = all cores this process may use
  std::string save_pid;                // the runner's pid, or "" (no pid file)
  LocalRankRule local_rank_rule = LocalRankRule::Modulo;
  int kill_grace_s = 30;
  int max_restarts = 0;                // a local agent restarts its ranks itself; a remote one is restarted
  int restart_count = 0;               // TORCHELASTIC_RESTART_COUNT of the ranks
  bool tethered = false;               // started by a remote runner (ssh, pdsh)
  bool tether_stdin = false;           // ...through a connection whose stdin we own (dsx's ssh runner)
  bool quiet = false;
  std::vector<EnvVar> base_env;        // inherited by every rank
};

// One supervised member per rank of this node; `log_stamp` names the per-rank log files.
std::vector<Member> rank_members(const AgentOptions& options, const std::string& python, const std::string& log_stamp);

// Runs the node's ranks to the end; returns the exit code (the first failing rank's).
int run_node_agent(const AgentOptions& options);

}  // namespace dsx::launcher
