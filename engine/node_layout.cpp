#include "engine/node_layout.h"

#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <map>
#include <sstream>

#include "dsx/error.h"

namespace dsx::engine {

std::vector<int> NodeLayout::ranks_of(int n) const {
  std::vector<int> ranks;
  for (int r = 0; r < static_cast<int>(node_of.size()); ++r)
    if (node_of[r] == n) ranks.push_back(r);
  return ranks;
}

std::string node_name_from_environment() {
  for (const char* name : {"GROUP_RANK", "NODE_RANK"}) {
    if (const char* v = std::getenv(name); v && *v) return std::string("node ") + v;
  }
  char host[HOST_NAME_MAX + 1] = {};
  if (::gethostname(host, sizeof host - 1) != 0) return "this host";
  return host;
}

NodeLayout discover_node_layout(comm::Store& store, const std::string& key, int rank, int world,
                                const std::string& node_name, std::chrono::milliseconds timeout) {
  store.set(key + "name/" + std::to_string(rank), node_name);
  if (rank == 0) {
    std::map<std::string, int> index;  // node name -> node number, in order of first rank
    std::ostringstream text;
    for (int r = 0; r < world; ++r) {
      const std::string name = store.get(key + "name/" + std::to_string(r), timeout);
      const int n = index.emplace(name, static_cast<int>(index.size())).first->second;
      text << (r ? "," : "") << n;
    }
    store.set(key + "layout", text.str());
  }
  NodeLayout layout;
  std::istringstream in(store.get(key + "layout", timeout));
  for (std::string item; std::getline(in, item, ',');) layout.node_of.push_back(std::stoi(item));
  if (static_cast<int>(layout.node_of.size()) != world)
    throw Error(ErrorKind::Internal, "node layout lists " + std::to_string(layout.node_of.size()) +
                                         " ranks for a world of " + std::to_string(world));
  for (int r = 0; r < world; ++r) {
    if (layout.node_of[r] == static_cast<int>(layout.leaders.size())) layout.leaders.push_back(r);
  }
  layout.nodes = static_cast<int>(layout.leaders.size());
  layout.node = layout.node_of[rank];
  return layout;
}

}  // namespace dsx::engine
