// What the user asks for on AWS (the flags of `dsx cloud aws ...`) and the names dsx gives the
// resources it creates. Every resource is named dsx-<cluster> and tagged dsx-cluster=<cluster>,
// so `down` finds exactly what `up` made.
#pragma once

#include <string>

namespace dsx::cloud {

// The Deep Learning Base OSS Nvidia Driver GPU AMI (Ubuntu 22.04), resolved at launch time.
inline constexpr const char* kDefaultAwsImage =
    "resolve:ssm:/aws/service/deeplearning/ami/x86_64/"
    "base-oss-nvidia-driver-gpu-ubuntu-22.04/latest/ami-id";

struct AwsClusterOptions {
  std::string cluster;  // name: lower-case letters, digits, '-'
  std::string region;
  std::string instance_type = "p5.48xlarge";
  int count = 2;
  std::string subnet;                     // one private subnet in one AZ (EFA traffic stays in it)
  std::string ssh_cidr;                   // who may SSH in (bastion, VPN)
  std::string key_name;                   // EC2 key pair for the default user; optional
  std::string image = kDefaultAwsImage;   // ami-... or resolve:ssm:...
  std::string root_device = "/dev/sda1";  // Ubuntu; Amazon Linux uses /dev/xvda
  int root_volume_gb = 500;
  std::string capacity_reservation;  // cr-...; empty = on-demand
  bool capacity_block = false;       // the reservation is an EC2 Capacity Block for ML
  bool efa_only = true;              // secondary cards get efa-only interfaces (no IP each)
  std::string security_group;        // an existing sg-...; empty = create dsx-<cluster>
  std::string instance_profile;      // an existing profile name; empty = create dsx-<cluster>-node
  std::string dsx_package;           // s3:// or https:// tarball of an installed dsx tree
  std::string os_user = "ubuntu";    // the image's login user: gets the cluster SSH key
  std::string out_dir = "dsx-cloud";
  // Shared storage made with the cluster, mounted at shared_dir on every node: none, fsx-lustre
  // (FSx for Lustre) or efs (EFS, elastic throughput). See cloud/aws_storage.h.
  std::string storage = "none";
  int storage_gb = 1200;                        // FSx: 1200, 2400, then steps of 2400 GiB
  std::string fsx_deployment = "PERSISTENT_2";  // or SCRATCH_2
  int fsx_throughput = 0;  // PERSISTENT_2: 125/250/500/1000 MB/s per TiB; 0 = 250
  bool keep_storage = false;                    // down leaves the file system
  std::string shared_dir = "/shared";
};

// Throws dsx::Error(Usage) naming the flag when a value is missing or malformed.
void validate(const AwsClusterOptions& options);

// Names derived from the cluster name.
std::string aws_resource_name(const AwsClusterOptions& options);   // dsx-<cluster>
std::string aws_node_role_name(const AwsClusterOptions& options);  // dsx-<cluster>-node
std::string aws_key_parameter(const AwsClusterOptions& options);   // /dsx/<cluster>/cluster-key
bool aws_creates_security_group(const AwsClusterOptions& options);
// The security group the nodes (and the shared storage) are in: "${SG_ID}" when up creates it.
std::string aws_security_group_id(const AwsClusterOptions& options);
bool aws_creates_instance_profile(const AwsClusterOptions& options);
// Targeted capacity reservations may lie outside a new placement group (ref 1.2.3): skip it.
bool aws_uses_placement_group(const AwsClusterOptions& options);

}  // namespace dsx::cloud
