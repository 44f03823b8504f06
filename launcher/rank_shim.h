// Under mpirun or srun the scheduler starts the ranks and names them in its own variables
// (OMPI_COMM_WORLD_*, PMI_*, MV2_COMM_WORLD_*, SLURM_*). The rank shim maps them to the
// DeepSpeed/torchrun set (RANK, LOCAL_RANK, WORLD_SIZE, ...) inside the rank, then execs the
// program; the exit code is the program's (DeepSpeed's MPICH helper always exits 0).
#pragma once

#include <vector>

#include "launcher/rank_env.h"

namespace dsx::launcher {

// The variables to set, derived from the scheduler's. Throws dsx::Error(Launch) when no
// scheduler variables are present or two schedulers disagree on the rank.
std::vector<EnvVar> scheduler_rank_env(const std::vector<EnvVar>& environment);

}  // namespace dsx::launcher
