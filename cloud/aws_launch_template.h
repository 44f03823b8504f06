// The EC2 launch template (the LaunchTemplateData of CreateLaunchTemplate): one EFA interface
// per network card, placement group, security group, instance profile, image, storage,
// capacity, tags and the base64 user data (shared/ref/cloud.md 1.3, 1.4).
#pragma once

#include <string>
#include <vector>

#include "cloud/aws_cluster.h"
#include "cloud/instance_types.h"

namespace dsx::cloud {

struct EfaInterface {
  int network_card_index;
  int device_index;
  std::string interface_type;  // "efa" (EFA + IP) or "efa-only" (EFA device, no IP)
};

// Card 0 / device 0 is the primary `efa` interface that carries the node's IP; every other card
// gets one interface at device 0: `efa-only` where supported and wanted, else `efa`.
std::vector<EfaInterface> efa_interfaces(const AwsInstanceType& type, bool efa_only);

// EC2 accepts at most 16 KB of user data, counted as the base64 text in a launch template.
inline constexpr size_t kAwsUserDataLimit = size_t{16} * 1024;

// The UserData field: base64 of the script, or of its gzip (which cloud-init unpacks) when the
// plain text would be over the limit. Throws dsx::Error(Config) when even that is too large.
std::string aws_user_data_field(const std::string& script);

// The LaunchTemplateData JSON (pretty-printed). `security_group_id` may be "${SG_ID}", filled in
// by `up` once the group exists. Throws dsx::Error(Config) when the user data is too large.
std::string render_launch_template(const AwsClusterOptions& options,
                                   const std::string& security_group_id,
                                   const std::string& user_data_script);

}  // namespace dsx::cloud
