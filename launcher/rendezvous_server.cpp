// The store side of rendezvous_server.h: a poll() loop over the listening socket and one
// connection per agent, the job's state in one struct, decisions in small functions.
#include "launcher/rendezvous_server.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <sstream>
#include <tuple>
#include <vector>

#include "launcher/line_socket.h"

namespace dsx::launcher {

using Clock = std::chrono::steady_clock;

struct RendezvousServer::State {
  struct Agent {
    LineSocket socket;
    bool joined = false, succeeded = false;
    int failures = 0;      // attempts its ranks failed (elastic: twice and it is left out)
    bool left_out = false;  // told STOP after failing twice; its agent hangs up
    int nproc = 0, node_rank = -1, port = 0;
    long arrival = 0;
    long last_group = -1;  // its group rank in the previous attempt: a restart keeps it
    std::string address;
  };
  RendezvousRules rules;
  std::vector<std::unique_ptr<Agent>> agents;
  int attempt = 0;
  int restarts_left = 0;
  bool running = false;  // WORLD sent for `attempt`
  bool over = false;     // DONE or STOP sent
  Clock::time_point join_deadline;
  Clock::time_point last_call{};  // set when the MIN-th node joins this attempt ({}: not yet)
  Clock::time_point over_at;
  long arrivals = 0;

  bool elastic() const { return rules.min_nodes < rules.nnodes; }
  std::string node_range() const {
    return elastic() ? std::to_string(rules.min_nodes) + ".." + std::to_string(rules.nnodes)
                     : std::to_string(rules.nnodes);
  }
  void broadcast(const std::string& line) {
    for (auto& a : agents)
      if (!a->left_out) a->socket.send(line);
  }
  int joined() const {
    return static_cast<int>(
        std::count_if(agents.begin(), agents.end(), [](const auto& a) { return a->joined; }));
  }
  void stop(int code, const std::string& why) {
    over = true;
    running = false;
    over_at = Clock::now();
    broadcast("STOP " + std::to_string(code) + " " + why);
  }

  // A node failed while the world ran: restart everybody, or stop when no restart is left.
  // `culprit` is the node whose ranks failed (null for a lost one, which is gone anyway).
  void fail(int code, const std::string& why, Agent* culprit = nullptr) {
    if (culprit) ++culprit->failures;
    if (restarts_left == 0) return stop(code, why);
    --restarts_left;
    ++attempt;
    running = false;
    join_deadline = Clock::now() + rules.join_timeout;
    last_call = {};
    for (auto& a : agents) a->joined = a->succeeded = false;
    std::string because = why;
    if (elastic() && culprit && culprit->failures >= 2) {
      const std::string left = "node " + culprit->address + " failed twice and is left out";
      culprit->socket.send("STOP 1 " + why + "; " + left + " (--nnodes " + node_range() +
                           "); the others go on without it");
      culprit->left_out = true;
      because += "; " + left + ", the job re-forms with the nodes that remain";
    }
    broadcast("RESTART " + std::to_string(attempt) + " " + because);
  }

  // When the world of this attempt forms: with every node it can have; the first world also with
  // the MIN or more there are once the last call passed; a restart once every node still connected
  // is back (one that runs its `dsx report --check` first may take longer than a last call).
  bool ready_to_form() const {
    const int j = joined();
    if (j >= rules.nnodes) return true;
    if (j < rules.min_nodes) return false;
    const auto present = static_cast<int>(std::count_if(
        agents.begin(), agents.end(), [](const auto& a) { return !a->left_out; }));
    const auto now = Clock::now();
    const bool last_call_over = last_call != Clock::time_point{} && now >= last_call;
    return (attempt > 0 && j == present) || (attempt == 0 && last_call_over) || now >= join_deadline;
  }

  // torchrun's last call: MIN nodes are in, the others get last_call_timeout more; fewer than
  // MIN again (a node gone before the world formed) and the call is off.
  void update_last_call() {
    const int j = joined();
    if (j < rules.min_nodes) last_call = {};
    else if (last_call == Clock::time_point{}) last_call = Clock::now() + rules.last_call_timeout;
  }

  // Every node is here: order them, and tell each its group rank and the world.
  void form_world() {
    std::vector<Agent*> members;
    for (auto& a : agents)
      if (a->joined) members.push_back(a.get());
    if (rules.by_node_rank) {
      std::sort(members.begin(), members.end(),
                [](Agent* x, Agent* y) { return x->node_rank < y->node_rank; });
      for (int g = 0; g < static_cast<int>(members.size()); ++g) {
        if (members[g]->node_rank != g) {
          return stop(1, "the nodes' --node_rank values are not 0.." +
                             std::to_string(rules.nnodes - 1) + " each once (node " +
                             members[g]->address + " gave " +
                             std::to_string(members[g]->node_rank) +
                             "); give every node its own --node_rank");
        }
      }
    } else {
      // Kept across restarts, so that a node finds its node-local checkpoints where it left them.
      const auto key = [](const Agent* a) {
        return std::make_tuple(a->address, a->last_group < 0 ? LONG_MAX : a->last_group,
                               a->arrival);
      };
      std::sort(members.begin(), members.end(),
                [&](Agent* x, Agent* y) { return key(x) < key(y); });
    }
    std::string nodes;
    for (Agent* m : members)
      nodes += (nodes.empty() ? "" : ",") + m->address + ":" + std::to_string(m->nproc);
    const std::string master = members[0]->address + " " + std::to_string(members[0]->port);
    for (size_t g = 0; g < members.size(); ++g) {
      members[g]->last_group = static_cast<long>(g);
      members[g]->socket.send("WORLD " + std::to_string(g) + " " + std::to_string(attempt) + " " +
                              master + " " + nodes);
    }
    running = true;
  }

  void on_join(Agent& a, std::istringstream& in) {
    std::string run_id;
    int attempt_of = -1;
    in >> run_id >> attempt_of >> a.nproc >> a.node_rank >> a.address >> a.port;
    if (run_id != rules.run_id) {
      a.socket.send("STOP 1 this rendezvous serves run id '" + rules.run_id + "', not '" + run_id +
                    "'; give every node the same --rdzv_id");
      return;
    }
    if (over) return (void)a.socket.send("STOP 1 the job has ended");
    if (a.left_out) return (void)a.socket.send("STOP 1 this node was left out of the job");
    if (joined() >= rules.nnodes) {
      return (void)a.socket.send("STOP 1 the job already has its " + std::to_string(rules.nnodes) +
                                 " nodes (--nnodes " + node_range() + ")");
    }
    if (running) {
      if (!elastic())
        return (void)a.socket.send("STOP 1 the job is already running on its " +
                                   std::to_string(rules.nnodes) + " nodes");
      return;  // it waits: it hears RESTART with the others and joins then
    }
    if (attempt_of != attempt) return;  // a late message of an earlier attempt
    a.joined = true;
    a.arrival = ++arrivals;
    update_last_call();
    if (ready_to_form()) form_world();
  }

  void on_line(Agent& a, const std::string& line) {
    std::istringstream in(line);
    std::string word;
    in >> word;
    int attempt_of = -1, code = 1;
    if (word == "JOIN") return on_join(a, in);
    if (word == "ABORT") {
      in >> code;
      std::string why;
      std::getline(in >> std::ws, why);
      if (!over) stop(code, why);
      return;
    }
    in >> attempt_of;
    if (!running || attempt_of != attempt) return;
    if (word == "SUCCEEDED") {
      a.succeeded = true;
      const bool all = std::all_of(agents.begin(), agents.end(),
                                   [](const auto& x) { return !x->joined || x->succeeded; });
      if (all) {
        over = true;
        running = false;
        over_at = Clock::now();
        broadcast("DONE");
      }
    } else if (word == "FAILED") {
      in >> code;
      std::string why;
      std::getline(in >> std::ws, why);
      fail(code, why, &a);
    }
  }

  // The connection of `a` closed: a lost node when it was part of a running world.
  void on_closed(const Agent& a) {
    if (over || !a.joined) return;
    if (running) return fail(1, "the agent of node " + a.address + " is gone (node lost?)");
  }
};

RendezvousServer::RendezvousServer(int listen_fd, const RendezvousRules& rules)
    : listen_fd_(listen_fd), port_(bound_port(listen_fd)), state_(std::make_unique<State>()) {
  state_->rules = rules;
  state_->restarts_left = rules.max_restarts;
  state_->join_deadline = Clock::now() + rules.join_timeout;
  thread_ = std::thread([this] { serve(); });
}

RendezvousServer::~RendezvousServer() {
  quit_ = true;
  thread_.join();
  ::close(listen_fd_);
}

bool RendezvousServer::wait_finished(std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  while (!finished_ && Clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  return finished_;
}

void RendezvousServer::serve() {
  State& s = *state_;
  while (!quit_) {
    std::vector<pollfd> fds = {{listen_fd_, POLLIN, 0}};
    for (auto& a : s.agents) fds.push_back({a->socket.fd(), POLLIN, 0});
    ::poll(fds.data(), fds.size(), 100);
    if (fds[0].revents & POLLIN) {
      int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd >= 0) {
        s.agents.push_back(std::make_unique<State::Agent>());
        s.agents.back()->socket = LineSocket(fd);
      }
    }
    for (size_t i = 1; i < fds.size(); ++i) {
      if (!fds[i].revents) continue;
      State::Agent& a = *s.agents[i - 1];
      const bool open = a.socket.read_available();
      while (a.socket.has_line()) s.on_line(a, a.socket.take_line());
      if (!open) {
        s.on_closed(a);
        a.socket = LineSocket();
      }
    }
    std::erase_if(s.agents, [](const auto& a) { return a->socket.fd() < 0; });
    if (!s.running) s.update_last_call();
    if (!s.over && !s.running && s.joined() > 0 && s.ready_to_form()) s.form_world();
    if (!s.over && !s.running && Clock::now() >= s.join_deadline) {
      s.stop(1, "the rendezvous timed out: " + std::to_string(s.joined()) + " of " +
                    s.node_range() + " nodes joined within " +
                    std::to_string(s.rules.join_timeout.count()) +
                    " s (start every node, with the same --nnodes and rendezvous endpoint)");
    }
    // Once the end is said, the agents hang up; stragglers get 5 s.
    if (s.over && (s.agents.empty() || Clock::now() > s.over_at + std::chrono::seconds(5)))
      finished_ = true;
  }
}

}  // namespace dsx::launcher
