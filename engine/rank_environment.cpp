// The rank environment (see rank_environment.h).
#include "engine/rank_environment.h"

#include <cstdlib>

namespace dsx::engine {

comm::RankEnv rank_env() {
  if (std::getenv("RANK") || std::getenv("WORLD_SIZE")) return comm::rank_env_from_environment();
  comm::RankEnv env;
  env.master.port = 0;  // a lone process: any free port
  return env;
}

int local_ranks() {
  const char* v = std::getenv("LOCAL_WORLD_SIZE");
  const int n = v ? std::atoi(v) : 0;
  return n > 0 ? n : 1;
}

}  // namespace dsx::engine
