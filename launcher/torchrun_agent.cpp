// The node agent of `dsx torchrun` (torchrun_options.h): host or reach the rendezvous
// (rendezvous_server.h), start this node's ranks with torchrun's environment once the world is
// formed, and report how they ended; the store says whether to stop, restart or finish.
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <sstream>

#include "dsx/error.h"
#include "launcher/env_export.h"
#include "launcher/line_socket.h"
#include "launcher/node_agent.h"
#include "launcher/node_check.h"
#include "launcher/preflight.h"
#include "launcher/rendezvous_server.h"
#include "launcher/torchrun_options.h"

namespace dsx::launcher {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::seconds;

void say(const std::string& text) { std::cerr << "dsx torchrun: " << text << std::endl; }

// The store, when this agent serves it: static's node 0 always (its port must be free); under
// c10d whichever agent can bind the endpoint first (an address of another machine, or a port
// another agent here already holds, makes this one a client), as torchrun decides.
std::unique_ptr<RendezvousServer> host_rendezvous(const TorchrunOptions& t, int& port) {
  const bool must = t.static_backend && t.node_rank <= 0;
  if (t.static_backend && !must) return nullptr;
  const int fd = listen_tcp(t.rdzv_host, t.rdzv_port);
  if (fd < 0) {
    if (!must) return nullptr;
    throw Error(ErrorKind::Launch,
                "node 0 cannot serve the rendezvous at " + t.rdzv_host + ":" +
                    std::to_string(t.rdzv_port) + " (" + std::strerror(-fd) +
                    "); give --master_addr an address of this machine and a free --master_port");
  }
  RendezvousRules rules{t.run_id,         t.nnodes,         t.min_nodes,    t.max_restarts,
                        t.static_backend, t.join_timeout,   t.last_call_timeout};
  auto server = std::make_unique<RendezvousServer>(fd, rules);
  port = server->port();
  return server;
}

struct Assignment {
  int group_rank = 0, attempt = 0, master_port = 0;
  std::string master_addr;
  World world;
};

// WORLD's fields (rendezvous_server.h) as the world of a launch: a node per agent, its ranks'
// slots 0..nproc-1.
Assignment parse_world(std::istringstream& in) {
  Assignment a;
  std::string nodes;
  in >> a.group_rank >> a.attempt >> a.master_addr >> a.master_port >> nodes;
  std::istringstream list(nodes);
  for (std::string node; std::getline(list, node, ',');) {
    const auto colon = node.rfind(':');
    HostSlots h{node.substr(0, colon), {}};
    for (int s = 0, n = std::stoi(node.substr(colon + 1)); s < n; ++s) h.slots.push_back(s);
    a.world.push_back(h);
  }
  return a;
}

// The line an elastic job says when its node count changed between attempts.
std::string world_change(size_t nodes_before, const Assignment& a) {
  int ranks = 0;
  for (const HostSlots& h : a.world) ranks += static_cast<int>(h.slots.size());
  return "the job re-forms with " + std::to_string(a.world.size()) + " node(s) instead of " +
         std::to_string(nodes_before) + " (" + std::to_string(ranks) + " ranks, attempt " +
         std::to_string(a.attempt) + "); dsx train keeps train_batch_size";
}

// The next word from the store: WORLD, RESTART, DONE or STOP (the latter two end the agent).
std::string next_message(LineSocket& store, seconds timeout, const std::string& what) {
  auto line = store.read_line(timeout, what + " from the rendezvous");
  if (!line)
    return "STOP 1 the rendezvous host closed the connection (its node stopped or was lost)";
  return *line;
}

// torchrun's additions to a rank's environment over dsx's (rank_env.h): its run id, restart
// count and role; CUDA_VISIBLE_DEVICES as the agent has it; TORCHELASTIC_ERROR_FILE with
// --log_dir; TORCH_NCCL_ASYNC_ERROR_HANDLING and OMP_NUM_THREADS as torchrun defaults them.
void torchrun_environment(Member& m, const TorchrunOptions& t, const Assignment& a, int local_rank,
                          const std::string& attempt_dir) {
  auto& env = m.spawn.env;
  const auto set = [&](const std::string& k, const std::string& v) { env_set(env, k, &v); };
  set("TORCHELASTIC_RUN_ID", t.run_id);
  set("TORCHELASTIC_RESTART_COUNT", std::to_string(a.attempt));
  set("TORCHELASTIC_MAX_RESTARTS", std::to_string(t.max_restarts));
  set("ROLE_NAME", t.role);
  set("TORCHELASTIC_SIGNALS_TO_HANDLE",
      "SIGTERM,SIGINT,SIGHUP,SIGQUIT");  // what the agent forwards
  const std::string visible = env_value(current_environment(), "CUDA_VISIBLE_DEVICES");
  env_set(env, "CUDA_VISIBLE_DEVICES", visible.empty() ? nullptr : &visible);
  if (env_value(env, "TORCH_NCCL_ASYNC_ERROR_HANDLING").empty())
    set("TORCH_NCCL_ASYNC_ERROR_HANDLING", "1");
  // Under elastic membership the world may change between attempts: dsx train keeps the global
  // batch (config/elastic_batch.h) instead of refusing a triad written for another world.
  if (t.min_nodes < t.nnodes) set("DSX_ELASTIC_BATCH", "1");
  if (env_value(current_environment(), "OMP_NUM_THREADS").empty() && t.nproc_per_node > 1)
    set("OMP_NUM_THREADS", "1");
  if (!attempt_dir.empty()) {
    const std::string dir = attempt_dir + "/" + std::to_string(local_rank);
    std::filesystem::create_directories(dir);
    set("TORCHELASTIC_ERROR_FILE", dir + "/error.json");
    const auto choice = [&](const std::vector<int>& per_rank) {
      return local_rank < static_cast<int>(per_rank.size()) ? per_rank[local_rank] : 0;
    };
    // Redirected: the file only. Teed: the file and the console, so each stream reads apart.
    const int redirected = choice(t.redirects), teed = choice(t.tee) & ~redirected;
    if (redirected & 1) m.spawn.stdout_path = dir + "/stdout.log";
    if (redirected & 2) m.spawn.stderr_path = dir + "/stderr.log";
    if (teed & 1) m.tee_stdout_path = dir + "/stdout.log";
    if (teed & 2) m.tee_stderr_path = dir + "/stderr.log";
    m.spawn.separate_stderr = teed != 0;
  }
  const auto& shown = t.local_ranks_filter;
  m.to_console = shown.empty() || std::find(shown.begin(), shown.end(), local_rank) != shown.end();
}

std::vector<Member> attempt_members(const TorchrunOptions& t, const Assignment& a,
                                    const std::string& log_root) {
  AgentOptions o;
  o.world = a.world;
  o.node_rank = a.group_rank;
  o.master_addr = a.master_addr;
  o.master_port = a.master_port;
  o.program = t.program;
  o.local_rank_rule = LocalRankRule::Index;
  o.kill_grace_s = t.kill_grace_s;
  o.base_env = current_environment();
  std::string attempt_dir;
  if (!log_root.empty()) attempt_dir = log_root + "/attempt_" + std::to_string(a.attempt);
  if (!attempt_dir.empty()) std::filesystem::remove_all(attempt_dir);  // torchrun wipes it too
  auto members = rank_members(o, t.python, "");
  for (size_t i = 0; i < members.size(); ++i)
    torchrun_environment(members[i], t, a, static_cast<int>(i), attempt_dir);
  return members;
}

// torchrun's log directory for this job: <log_dir>/<run_id>_<random>, or "" without --log_dir.
std::string log_root(const TorchrunOptions& t) {
  if (t.log_dir.empty()) return "";
  std::string tmpl = t.log_dir + "/" + t.run_id + "_XXXXXX";
  std::filesystem::create_directories(t.log_dir);
  if (!::mkdtemp(tmpl.data()))
    throw Error(ErrorKind::Io, "--log_dir " + t.log_dir + ": " + std::strerror(errno));
  return tmpl;
}

// One attempt's ranks, run to their end; returns what this agent tells the store.
std::string run_attempt(const TorchrunOptions& t, const Assignment& a, const std::string& logs,
                        int store_fd, bool& interrupted) {
  SupervisorOptions s;
  s.kill_grace_s = t.kill_grace_s;
  s.stop_fd = store_fd;
  s.stopped_rank_timeout_s = stopped_rank_timeout_from(current_environment());
  s.hung_step_timeout_s = s.stopped_rank_timeout_s;
  const Outcome out = supervise(attempt_members(t, a, logs), s);
  interrupted = out.interrupted;
  if (out.stopped_by_fd) return "";
  if (out.interrupted)
    return "ABORT " + std::to_string(out.exit_code) + " node " + std::to_string(a.group_rank) +
           ": " + out.reason;
  if (out.exit_code == 0) return "SUCCEEDED " + std::to_string(a.attempt);
  return "FAILED " + std::to_string(a.attempt) + " " + std::to_string(out.exit_code) + " node " +
         std::to_string(a.group_rank) + ": " + out.reason;
}

// After this node's ranks succeeded, the others may still run (a rank 0 that saves last): wait
// for the store's word as long as it is there, which is as long as some node runs, each under its
// own watchdogs. A store that is gone leaves this node's success standing.
std::string word_after_success(LineSocket& store) {
  while (true) {
    try {
      auto line = store.read_line(std::chrono::seconds(60), "word");
      return line ? *line : "DONE";
    } catch (const Error&) {  // a minute without a word: the other nodes still run
    }
  }
}

// Elastic jobs leave out a node that fails `dsx report --check`: before its first rendezvous, and
// before a restart its own ranks caused (a GPU may have fallen off the bus); a restart another
// node caused does not wait for the check (about a second). False when this node is out.
bool node_ready(const TorchrunOptions& t) {
  if (t.min_nodes >= t.nnodes) return true;  // a fixed node count cannot go on without it
  const NodeCheck check = run_node_check(seconds(60));
  if (check.passed) return true;
  say("this node fails `dsx report --check` (" + check.errors +
      "); it is left out of the job (--nnodes " + std::to_string(t.min_nodes) + ".." +
      std::to_string(t.nnodes) + "); the others go on without it");
  return false;
}

int agent_loop(const TorchrunOptions& t, LineSocket& store, const std::string& my_addr) {
  const std::string logs = log_root(t);
  int attempt = 0;
  bool own_failure = false;  // this node's ranks failed the last attempt
  size_t nodes_before = 0;
  while (true) {
    if (own_failure && !node_ready(t)) return 1;  // the first check ran before connecting
    const int port =
        pick_free_port(my_addr);  // the ranks' store, if this node becomes group rank 0
    store.send("JOIN " + t.run_id + " " + std::to_string(attempt) + " " +
               std::to_string(t.nproc_per_node) + " " + std::to_string(t.node_rank) + " " +
               my_addr + " " + std::to_string(port));
    std::istringstream in(next_message(store, t.join_timeout + seconds(30), "the world"));
    std::string word;
    in >> word;
    if (word == "WORLD") {
      const Assignment a = parse_world(in);
      if (nodes_before && a.world.size() != nodes_before) say(world_change(nodes_before, a));
      nodes_before = a.world.size();
      bool interrupted = false;
      const std::string report = run_attempt(t, a, logs, store.fd(), interrupted);
      if (!report.empty()) store.send(report);
      const bool succeeded = report.starts_with("SUCCEEDED");
      own_failure = report.starts_with("FAILED");
      in = std::istringstream(
          succeeded ? word_after_success(store)
                    : next_message(store, seconds(interrupted ? 10 : 60), "the job's next step"));
      in >> word;
      if (interrupted && word != "STOP") return 128 + 2;
    }
    if (word == "DONE") return 0;
    if (word == "RESTART") {
      std::string why;
      in >> attempt;
      std::getline(in >> std::ws, why);
      say(why + "; restarting this node's ranks (restart " + std::to_string(attempt) + " of " +
          std::to_string(t.max_restarts) + ")");
      continue;
    }
    int code = 1;
    std::string why;
    in >> code;
    std::getline(in >> std::ws, why);
    const bool left_out = why.find("is left out") != std::string::npos;  // the job goes on
    say(why + (t.max_restarts > 0 && code != 0 && !left_out ? "; the job stops" : ""));
    return code == 0 ? 1 : code;
  }
}

}  // namespace

int run_torchrun(const TorchrunOptions& options) {
  TorchrunOptions t = options;
  int port = t.rdzv_port;
  auto server = host_rendezvous(t, port);
  t.rdzv_port = port;
  int code = 1;
  if (node_ready(t)) {
    const auto deadline = Clock::now() + t.join_timeout;
    LineSocket store(connect_tcp(t.rdzv_host, port, deadline));
    const std::string my_addr = t.local_addr.empty() ? local_address(store.fd()) : t.local_addr;
    code = agent_loop(t, store, my_addr);
  }
  // A node out of the job (its check failed, or it failed twice) that serves the rendezvous
  // serves it on until the others end: the job ends at their DONE or STOP, or at the join timeout.
  if (server && !server->wait_finished(std::chrono::seconds(10))) {
    say("this node serves the job's rendezvous until the other nodes end");
    while (!server->wait_finished(std::chrono::seconds(60))) {
    }
  }
  return code;
}

}  // namespace dsx::launcher
