// Mapping scheduler variables to the rank environment.
#include "launcher/rank_shim.h"

#include <cctype>
#include <optional>
#include <string>

#include "dsx/error.h"
#include "launcher/env_export.h"

namespace dsx::launcher {
namespace {

// The first of `names` that is set and numeric. Two different values among the set ones is an
// error: the process would not know which rank it is.
std::optional<int> pick(const std::vector<EnvVar>& env, const std::vector<const char*>& names, const char* what) {
  std::optional<int> value;
  std::string from;
  for (const char* name : names) {
    std::string text = env_value(env, name);
    if (text.empty() || text.size() > 9 || !std::isdigit(static_cast<unsigned char>(text[0]))) continue;
    int v = std::stoi(text);
    if (value && *value != v) {
      throw Error(ErrorKind::Launch, std::string("conflicting ") + what + ": " + from + "=" + std::to_string(*value) +
                                         " but " + name + "=" + text + "; run the rank under one scheduler only");
    }
    if (!value) from = name;
    value = v;
  }
  return value;
}

// SLURM_TASKS_PER_NODE like "2(x3),1": the count on node `node`.
std::optional<int> slurm_tasks_on_node(const std::string& text, int node) {
  size_t pos = 0;
  int index = 0;
  while (pos < text.size()) {
    size_t end = text.find(',', pos);
    if (end == std::string::npos) end = text.size();
    std::string item = text.substr(pos, end - pos);
    int count = std::atoi(item.c_str());
    int repeat = 1;
    if (auto x = item.find("(x"); x != std::string::npos) repeat = std::atoi(item.c_str() + x + 2);
    if (node < index + repeat) return count;
    index += repeat;
    pos = end + 1;
  }
  return std::nullopt;
}

}  // namespace

std::vector<EnvVar> scheduler_rank_env(const std::vector<EnvVar>& env) {
  auto rank = pick(env, {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "MV2_COMM_WORLD_RANK", "SLURM_PROCID"}, "ranks");
  auto size = pick(env, {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "MV2_COMM_WORLD_SIZE", "SLURM_NTASKS"}, "world sizes");
  auto local = pick(env, {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "PALS_LOCAL_RANKID", "MV2_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID"}, "local ranks");
  auto local_size = pick(env, {"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS", "MV2_COMM_WORLD_LOCAL_SIZE"}, "local sizes");
  auto node = pick(env, {"SLURM_NODEID"}, "node ranks");
  auto nnodes = pick(env, {"SLURM_NNODES"}, "node counts");
  if (!local_size && node) local_size = slurm_tasks_on_node(env_value(env, "SLURM_TASKS_PER_NODE"), *node);
  if (!rank || !size || !local || !local_size) {
    throw Error(ErrorKind::Launch,
                "--dsx_rank_shim: no scheduler rank variables found (OMPI_COMM_WORLD_*, PMI_*, MV2_COMM_WORLD_*, "
                "SLURM_PROCID/SLURM_NTASKS/SLURM_LOCALID); the shim only runs under mpirun or srun");
  }
  // Without a node index from the scheduler, nodes are assumed to hold equal rank blocks
  // (mpirun's default by-slot mapping).
  if (!node) node = *rank / *local_size;
  if (!nnodes) nnodes = (*size + *local_size - 1) / *local_size;
  std::string r = std::to_string(*rank), w = std::to_string(*size), n = std::to_string(*node),
              nn = std::to_string(*nnodes), ls = std::to_string(*local_size);
  return {{"RANK", r}, {"WORLD_SIZE", w}, {"LOCAL_RANK", std::to_string(*local)}, {"LOCAL_SIZE", ls},
          {"LOCAL_WORLD_SIZE", ls}, {"CROSS_RANK", n}, {"CROSS_SIZE", nn}, {"GROUP_RANK", n},
          {"GROUP_WORLD_SIZE", nn}, {"NODE_RANK", n}, {"ROLE_RANK", r}, {"ROLE_WORLD_SIZE", w},
          {"ROLE_NAME", "default"}, {"TORCHELASTIC_RESTART_COUNT", "0"}, {"TORCHELASTIC_MAX_RESTARTS", "0"},
          {"TORCHELASTIC_RUN_ID", "dsx-" + env_value(env, "MASTER_ADDR") + "-" + env_value(env, "MASTER_PORT")},
          {"TORCHELASTIC_USE_AGENT_STORE", "False"}};
}

}  // namespace dsx::launcher
