// `dsx cloud aws render`: every file a cluster needs, under options.out_dir:
//   cluster_key, cluster_key.pub   the cluster SSH key pair (kept when it exists)
//   aws/user-data.sh               the node script (plain text)
//   aws/launch-template.json       LaunchTemplateData, user data in base64, ${SG_ID} when new
//   aws/up.sh, aws/down.sh         the CLI calls of up and down, as bash scripts
//   slurm/dsx-train.sbatch         a batch job for Slurm clusters
#pragma once

#include <string>
#include <vector>

#include "cloud/aws_cluster.h"

namespace dsx::cloud {

// The node script for this cluster, with the cluster's public key.
std::string aws_user_data(const AwsClusterOptions& options, const std::string& public_key);

// Writes the files; returns their paths.
std::vector<std::string> render_aws(const AwsClusterOptions& options);

}  // namespace dsx::cloud
