// Which ranks share a node: what node-local checkpoints need to know (whose files lie on which
// disk, and which rank of each node acts for it). A node is named by the launcher's node index
// (GROUP_RANK / NODE_RANK, which dsx launch, torchrun and DeepSpeed's launcher set) or, without
// one, by the host name; nodes are numbered by their lowest rank, so node 0 holds rank 0.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "comm/store/store.h"

namespace dsx::engine {

struct NodeLayout {
  int node = 0;                  // this rank's node
  int nodes = 1;                 // how many
  std::vector<int> node_of;      // per rank
  std::vector<int> leaders;      // per node: its lowest rank, which acts for it
  bool leads(int rank) const { return leaders[node_of[rank]] == rank; }
  std::vector<int> ranks_of(int node) const;
};

// This process's node name: the launcher's node index, else the host name.
std::string node_name_from_environment();

// A collective over the store (2 operations per rank): every rank tells rank 0 its node name
// under `key`, rank 0 numbers the nodes and publishes the result.
NodeLayout discover_node_layout(comm::Store& store, const std::string& key, int rank, int world,
                                const std::string& node_name, std::chrono::milliseconds timeout);

}  // namespace dsx::engine
