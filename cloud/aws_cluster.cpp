// Validation of the AWS options and the resource names derived from them.
#include "cloud/aws_cluster.h"

#include <cstdio>

#include "cloud/aws_storage.h"
#include "cloud/cluster_flags.h"
#include "cloud/dsx_package.h"
#include "cloud/instance_types.h"
#include "dsx/error.h"

namespace dsx::cloud {

namespace {

void require(bool ok, const std::string& message) {
  if (!ok) throw Error(ErrorKind::Usage, message);
}

bool starts_with(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

// a.b.c.d/n with each part in range.
bool is_ipv4_cidr(const std::string& text) {
  unsigned a, b, c, d, n;
  char tail;
  if (std::sscanf(text.c_str(), "%u.%u.%u.%u/%u%c", &a, &b, &c, &d, &n, &tail) != 5) return false;
  return a < 256 && b < 256 && c < 256 && d < 256 && n <= 32;
}

}  // namespace

void validate(const AwsClusterOptions& o) {
  validate_cluster_name(o.cluster);
  aws_instance_type(o.instance_type);
  require(!o.region.empty(), "--region is required (e.g. us-east-1)");
  require(o.count >= 1 && o.count <= 1000,
          "--count must be between 1 and 1000, got " + std::to_string(o.count));
  require(starts_with(o.subnet, "subnet-"),
          "--subnet must be a subnet id (subnet-...), got '" + o.subnet +
              "': all nodes go in one private subnet of one availability zone");
  require(is_ipv4_cidr(o.ssh_cidr),
          "--ssh-cidr must be an IPv4 CIDR such as 10.0.0.0/16, got '" + o.ssh_cidr + "'");
  require(starts_with(o.image, "ami-") || starts_with(o.image, "resolve:ssm:"),
          "--image must be an AMI id (ami-...) or resolve:ssm:<parameter>, got '" + o.image + "'");
  require(starts_with(o.root_device, "/dev/"),
          "--root-device must be a device name like /dev/sda1");
  require(o.root_volume_gb >= 50 && o.root_volume_gb <= 16384,
          "--root-gb must be between 50 and 16384");
  require(o.capacity_reservation.empty() || starts_with(o.capacity_reservation, "cr-"),
          "--capacity-reservation must be a reservation id (cr-...)");
  require(!o.capacity_block || !o.capacity_reservation.empty(),
          "--capacity-block needs --capacity-reservation with the block's cr-... id");
  require(o.security_group.empty() || starts_with(o.security_group, "sg-"),
          "--security-group must be a security group id (sg-...)");
  validate_dsx_package(o.dsx_package, "s3://");
  validate_aws_storage(o);
  require(!o.out_dir.empty(), "--out must name a directory");
}

std::string aws_resource_name(const AwsClusterOptions& o) { return "dsx-" + o.cluster; }
std::string aws_node_role_name(const AwsClusterOptions& o) { return "dsx-" + o.cluster + "-node"; }
std::string aws_key_parameter(const AwsClusterOptions& o) {
  return "/dsx/" + o.cluster + "/cluster-key";
}
bool aws_creates_security_group(const AwsClusterOptions& o) { return o.security_group.empty(); }
std::string aws_security_group_id(const AwsClusterOptions& o) {
  return aws_creates_security_group(o) ? "${SG_ID}" : o.security_group;
}
bool aws_creates_instance_profile(const AwsClusterOptions& o) { return o.instance_profile.empty(); }
bool aws_uses_placement_group(const AwsClusterOptions& o) { return o.capacity_reservation.empty(); }

}  // namespace dsx::cloud
