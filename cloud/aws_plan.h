// The AWS CLI calls behind `dsx cloud aws up|down|status|hostfile` (shared/ref/cloud.md 1.2).
#pragma once

#include <string>
#include <vector>

#include "cloud/aws_cluster.h"
#include "cloud/plan.h"

namespace dsx::cloud {

// `aws --region <region> <words...>`: how every call of the plans starts.
std::vector<std::string> aws_command(const AwsClusterOptions& options,
                                     std::vector<std::string> words);

// Where render puts each file, under options.out_dir.
std::string aws_launch_template_path(const AwsClusterOptions& options);  // aws/launch-template.json
std::string aws_user_data_path(const AwsClusterOptions& options);        // aws/user-data.sh

// Security group (self traffic + SSH from the CIDR), placement group, node role and instance
// profile, the cluster key in SSM, the launch template, run-instances for all nodes at once.
Plan aws_up_plan(const AwsClusterOptions& options);
// Terminates the cluster's instances and deletes what up created; each step may find it gone.
Plan aws_down_plan(const AwsClusterOptions& options);
// describe-instances of the cluster as JSON (status and hostfile parse it).
Step aws_describe_step(const AwsClusterOptions& options);

}  // namespace dsx::cloud
