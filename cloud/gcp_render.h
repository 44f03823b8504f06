// `dsx cloud gcp render`: every file a GCP cluster needs, under options.out_dir:
//   cluster_key, cluster_key.pub   the cluster SSH key pair (kept when it exists)
//   gcp/startup.sh                 the node script (the instance template's startup-script)
//   gcp/up.sh, gcp/down.sh         the gcloud calls of up and down, as bash scripts
//   slurm/dsx-train.sbatch         a batch job for Slurm clusters
#pragma once

#include <string>
#include <vector>

#include "cloud/gcp_cluster.h"

namespace dsx::cloud {

std::string gcp_startup_script(const GcpClusterOptions& options, const std::string& public_key);

std::vector<std::string> render_gcp(const GcpClusterOptions& options);

}  // namespace dsx::cloud
