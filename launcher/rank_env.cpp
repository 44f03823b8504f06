// Rank placement and the per-rank variables (ref/launcher.md 4.2 and 4.3).
#include "launcher/rank_env.h"

#include "dsx/error.h"
#include "dsx/join.h"

namespace dsx::launcher {

LocalRankRule parse_local_rank_rule(const std::string& name) {
  if (name == "modulo") return LocalRankRule::Modulo;
  if (name == "index") return LocalRankRule::Index;
  throw Error(ErrorKind::Usage, "--local_rank_rule must be 'modulo' (DeepSpeed) or 'index' (torchrun), not '" + name + "'");
}

std::vector<RankPlacement> place_ranks(const World& world, int node_rank, LocalRankRule rule) {
  if (node_rank < 0 || node_rank >= static_cast<int>(world.size())) {
    throw Error(ErrorKind::Usage, "node rank " + std::to_string(node_rank) + " is outside the world " + describe(world));
  }
  int first = 0;
  for (int n = 0; n < node_rank; ++n) first += static_cast<int>(world[n].slots.size());
  int local_size = static_cast<int>(world[node_rank].slots.size());
  std::vector<RankPlacement> ranks;
  for (int i = 0; i < local_size; ++i) {
    int rank = first + i;
    ranks.push_back({rank, rule == LocalRankRule::Modulo ? rank % local_size : i, i});
  }
  return ranks;
}

std::vector<EnvVar> rank_environment(const World& world, int node_rank, const RankPlacement& p,
                                     const std::string& master_addr, int master_port) {
  const auto& node = world[node_rank];
  std::string devices = join(node.slots, ",");
  std::string world_size_text = std::to_string(world_size(world));
  std::string local_size = std::to_string(node.slots.size());
  std::string nnodes = std::to_string(world.size());
  std::string node_text = std::to_string(node_rank);
  std::string rank = std::to_string(p.rank);
  std::string port = std::to_string(master_port);
  return {
      {"MASTER_ADDR", master_addr},
      {"MASTER_PORT", port},
      {"WORLD_SIZE", world_size_text},
      {"RANK", rank},
      {"LOCAL_RANK", std::to_string(p.local_rank)},
      {"LOCAL_SIZE", local_size},
      {"LOCAL_WORLD_SIZE", local_size},
      {"CROSS_RANK", node_text},
      {"CROSS_SIZE", nnodes},
      {"GROUP_RANK", node_text},
      {"GROUP_WORLD_SIZE", nnodes},
      {"NODE_RANK", node_text},
      {"ROLE_RANK", rank},
      {"ROLE_WORLD_SIZE", world_size_text},
      {"ROLE_NAME", "default"},
      {"TORCHELASTIC_RESTART_COUNT", "0"},
      {"TORCHELASTIC_MAX_RESTARTS", "0"},
      // The same id on every node without any exchange: the rendezvous endpoint names the job.
      {"TORCHELASTIC_RUN_ID", "dsx-" + master_addr + "-" + port},
      // No c10d store is served by the agent: ranks must host their own (see ref 4.3).
      {"TORCHELASTIC_USE_AGENT_STORE", "False"},
      {"CUDA_VISIBLE_DEVICES", devices},
  };
}

}  // namespace dsx::launcher
