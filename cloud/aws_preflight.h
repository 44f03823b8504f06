// AWS pre-flight (shared/ref/cluster_storage_preflight.md 4.1): the instance type is offered in
// the subnet's availability zone, supports EFA with the network cards the launch template uses,
// the P-instance vCPU quota covers --count, a given capacity reservation is active, of the
// type, in the zone and large enough, and the image is available in the region.
#pragma once

#include <string>
#include <vector>

#include "cloud/aws_cluster.h"
#include "cloud/plan.h"
#include "cloud/preflight.h"

namespace dsx::cloud {

// "Running On-Demand P instances", counted in vCPUs.
inline constexpr const char* kAwsPQuotaCode = "L-417A185B";

// What the read-only calls printed (JSON, the AZ as text); "" for a call that was not made or
// failed.
struct AwsPreflightAnswers {
  std::string subnet_az;
  std::string offerings_json;    // ec2 describe-instance-type-offerings
  std::string types_json;        // ec2 describe-instance-types
  std::string quota_json;        // service-quotas get-service-quota
  std::string reservation_json;  // ec2 describe-capacity-reservations (with a reservation)
};

std::vector<Finding> aws_preflight_findings(const AwsClusterOptions& options,
                                            const AwsPreflightAnswers& answers);

// The read-only steps; the last of the findings' steps judges them (report_findings to stderr).
// Then the image check (--image exists and is available in the region), which the printed
// script makes too.
void add_aws_preflight(Plan& plan, const AwsClusterOptions& options);

}  // namespace dsx::cloud
