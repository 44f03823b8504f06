// The gcloud calls behind `dsx cloud gcp up|down|status|hostfile` (shared/ref/cloud.md 2.2-2.4).
#pragma once

#include <string>
#include <vector>

#include "cloud/gcp_cluster.h"
#include "cloud/plan.h"

namespace dsx::cloud {

// `gcloud <words...> --project=<project> --quiet`: every call of the plans.
std::vector<std::string> gcloud_command(const GcpClusterOptions& options,
                                        std::vector<std::string> words);

std::string gcp_startup_script_path(const GcpClusterOptions& options);  // gcp/startup.sh

// A3 High/Mega: one VPC + subnet + firewall rule per GPU NIC; A3 Ultra: one RoCE VPC with a
// subnet per MRDMA NIC (no firewall rule: such VPCs take none). Then firewall rules on the
// primary VPC (all traffic between cluster VMs, SSH from the CIDR), a compact placement policy,
// the cluster key in Secret Manager, the instance template, and all VMs in one bulk create.
Plan gcp_up_plan(const GcpClusterOptions& options);
// Deletes the VMs and everything up created; each step may find it gone.
Plan gcp_down_plan(const GcpClusterOptions& options);
// gcloud compute instances list of the cluster as JSON (status and hostfile parse it).
Step gcp_list_step(const GcpClusterOptions& options);

}  // namespace dsx::cloud
