// The Slurm batch job both clouds render beside their own files (slurm/dsx-train.sbatch, embedded,
// with its {{nodes}} and {{gpus}} filled in).
#pragma once

#include <string>

namespace dsx::cloud {

// The Slurm batch job for `nodes` nodes of `gpus` GPUs each.
std::string render_slurm_job(int nodes, int gpus);

}  // namespace dsx::cloud
