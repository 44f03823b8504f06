// Shared storage for an AWS cluster (docs/cloud.md section 6): FSx for Lustre or EFS, made in the
// cluster's subnet and security group (whose self rule admits Lustre's TCP 988/1018-1023 and
// NFS's 2049 from the nodes), mounted at --shared-dir by every node. The file system's address
// reaches the nodes as the instance tag dsx-shared-source (read through instance metadata).
#pragma once

#include "cloud/aws_cluster.h"
#include "cloud/plan.h"

namespace dsx::cloud {

bool aws_has_storage(const AwsClusterOptions& options);
// Throws dsx::Error(Usage) naming the flag: kind, FSx capacity steps, deployment, throughput.
void validate_aws_storage(const AwsClusterOptions& options);

// Up, once the security group exists: the create call (EFS: and its wait, which a mount target
// needs). Captures FSX_ID or EFS_ID.
void add_aws_storage_create(Plan& plan, const AwsClusterOptions& options);
// Up, before the launch template: waits until the file system (and EFS mount target) is
// available and captures SHARED_SOURCE: "<dns>@tcp:/<mountname>" (FSx) or the mount target's
// address (EFS).
void add_aws_storage_wait(Plan& plan, const AwsClusterOptions& options);
// Down, after the instances are gone: deletes the file system (EFS: its mount target first) and
// waits until it is gone, since its interfaces keep the security group in use. None with
// --keep-storage.
void add_aws_storage_delete(Plan& plan, const AwsClusterOptions& options);

}  // namespace dsx::cloud
