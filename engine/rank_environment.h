// The rank environment a launcher (dsx, deepspeed, torchrun) gives this process, or that of a
// job of one when there is none.
#pragma once

#include "comm/rendezvous.h"

namespace dsx::engine {

// RANK, WORLD_SIZE, MASTER_ADDR, ... when a launcher set them; else rank 0 of 1 on a free port.
comm::RankEnv rank_env();

// The ranks on this node, as the launcher says (LOCAL_WORLD_SIZE); 1 when it does not.
int local_ranks();

}  // namespace dsx::engine
