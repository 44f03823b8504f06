// The environment every rank gets: DeepSpeed's launcher variables and torchrun's contract
// together, so that `dsx train`, a deepspeed script and a plain torch.distributed script all
// find what they read (RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, MASTER_ADDR, ...).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "launcher/world.h"

namespace dsx::launcher {

using EnvVar = std::pair<std::string, std::string>;

enum class LocalRankRule {
  Modulo,  // DeepSpeed (#3409): LOCAL_RANK = RANK mod ranks-on-this-node
  Index,   // torchrun: LOCAL_RANK = position of the slot on this node
};

// Throws dsx::Error(Usage) unless `name` is "modulo" or "index".
LocalRankRule parse_local_rank_rule(const std::string& name);

struct RankPlacement {
  int rank = 0;        // global rank
  int local_rank = 0;  // per the rule
  int index = 0;       // position on the node, 0..local_size-1
};

// The ranks of node `node_rank`, in slot order. Global ranks are contiguous over nodes in
// world order.
std::vector<RankPlacement> place_ranks(const World& world, int node_rank, LocalRankRule rule);

// The variables one rank gets (to be set on top of the inherited environment).
std::vector<EnvVar> rank_environment(const World& world, int node_rank, const RankPlacement& placement,
                                     const std::string& master_addr, int master_port);

}  // namespace dsx::launcher
