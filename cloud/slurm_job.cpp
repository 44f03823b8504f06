// The Slurm batch job from its embedded template (see slurm_job.h).
#include "cloud/slurm_job.h"

#include "cloud/embedded_files.h"
#include "cloud/render_files.h"

namespace dsx::cloud {

std::string render_slurm_job(int nodes, int gpus) {
  std::string text(embedded_file("slurm/dsx-train.sbatch"));
  text = replace_placeholder(text, "nodes", std::to_string(nodes));
  return replace_placeholder(text, "gpus", std::to_string(gpus));
}

}  // namespace dsx::cloud
