// FSx for Lustre and EFS steps of the AWS plans (shared/ref/cluster_storage_preflight.md 2.1,
// 2.2). Both are found again by `down` through the cluster's tag (FSx) or creation token (EFS).
#include "cloud/aws_storage.h"

#include "cloud/aws_plan.h"
#include "cloud/cluster_flags.h"
#include "dsx/error.h"

namespace dsx::cloud {

namespace {

void require(bool ok, const std::string& message) {
  if (!ok) throw Error(ErrorKind::Usage, message);
}

std::vector<std::string> tags(const AwsClusterOptions& o) {
  return {"--tags", "Key=Name,Value=" + aws_resource_name(o), "Key=dsx-cluster,Value=" + o.cluster};
}

std::vector<std::string> join(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

Step poll(std::string what, std::vector<std::string> argv, std::string until, int timeout_s) {
  Step step{std::move(what), std::move(argv)};
  step.until = std::move(until);
  step.timeout_s = timeout_s;
  return step;
}

// EFS LifeCycleState values from which `available` never comes (creating, updating pass).
const std::vector<std::string> kEfsFailStates = {"error", "deleting", "deleted"};

int fsx_throughput(const AwsClusterOptions& o) { return o.fsx_throughput ? o.fsx_throughput : 250; }

// The cluster's FSx file systems, as a JMESPath filter on their tags.
std::string fsx_of_cluster(const AwsClusterOptions& o) {
  return "FileSystems[?Tags[?Key=='dsx-cluster' && Value=='" + o.cluster + "']]";
}

void add_fsx_create(Plan& plan, const AwsClusterOptions& o) {
  std::string lustre = "DeploymentType=" + o.fsx_deployment;
  if (o.fsx_deployment == "PERSISTENT_2")
    lustre += ",PerUnitStorageThroughput=" + std::to_string(fsx_throughput(o));
  plan.steps.push_back(
      {"create FSx for Lustre " + aws_resource_name(o) + " (" + std::to_string(o.storage_gb) +
           " GiB, " + o.fsx_deployment + ") in " + o.subnet,
       aws_command(o, join({"fsx", "create-file-system", "--file-system-type", "LUSTRE",
                            "--storage-capacity", std::to_string(o.storage_gb), "--storage-type",
                            "SSD", "--subnet-ids", o.subnet, "--security-group-ids",
                            aws_security_group_id(o), "--lustre-configuration", lustre},
                           join(tags(o), {"--query", "FileSystem.FileSystemId", "--output",
                                          "text"}))),
       "FSX_ID"});
}

void add_efs_create(Plan& plan, const AwsClusterOptions& o) {
  plan.steps.push_back(
      {"create EFS file system " + aws_resource_name(o) + " (elastic throughput, encrypted)",
       aws_command(o, join({"efs", "create-file-system", "--creation-token", aws_resource_name(o),
                            "--performance-mode", "generalPurpose", "--throughput-mode", "elastic",
                            "--encrypted"},
                           join(tags(o), {"--query", "FileSystemId", "--output", "text"}))),
       "EFS_ID"});
  Step ready = poll("wait until the EFS file system is available (its mount target needs it)",
                    aws_command(o, {"efs", "describe-file-systems", "--file-system-id", "${EFS_ID}",
                                    "--query", "FileSystems[0].LifeCycleState", "--output", "text"}),
                    "available", 600);
  ready.fail_states = kEfsFailStates;
  plan.steps.push_back(ready);
  plan.steps.push_back(
      {"create its mount target in " + o.subnet + " (NFS 2049 through the security group)",
       aws_command(o, {"efs", "create-mount-target", "--file-system-id", "${EFS_ID}", "--subnet-id",
                       o.subnet, "--security-groups", aws_security_group_id(o), "--query",
                       "IpAddress", "--output", "text"}),
       "SHARED_SOURCE"});
}

void add_fsx_delete(Plan& plan, const AwsClusterOptions& o) {
  plan.steps.push_back({"find the cluster's FSx file system",
                        aws_command(o, {"fsx", "describe-file-systems", "--query",
                                        fsx_of_cluster(o) + ".FileSystemId | [0]", "--output",
                                        "text"}),
                        "FSX_ID"});
  Step remove{"delete it (no final backup)",
              aws_command(o, {"fsx", "delete-file-system", "--file-system-id", "${FSX_ID}"})};
  remove.skip_if_empty = "FSX_ID";
  remove.may_fail = true;
  remove.quiet = true;
  plan.steps.push_back(remove);
  Step gone = poll("wait until it is gone (its interfaces hold the security group)",
                   aws_command(o, {"fsx", "describe-file-systems", "--query",
                                   "length(" + fsx_of_cluster(o) + ")", "--output", "text"}),
                   "0", 1800);
  gone.skip_if_empty = "FSX_ID";
  plan.steps.push_back(gone);
}

void add_efs_delete(Plan& plan, const AwsClusterOptions& o) {
  plan.steps.push_back({"find the cluster's EFS file system",
                        aws_command(o, {"efs", "describe-file-systems", "--creation-token",
                                        aws_resource_name(o), "--query",
                                        "FileSystems[0].FileSystemId", "--output", "text"}),
                        "EFS_ID"});
  Step target{"find its mount target",
              aws_command(o, {"efs", "describe-mount-targets", "--file-system-id", "${EFS_ID}",
                              "--query", "MountTargets[0].MountTargetId", "--output", "text"}),
              "EFS_MOUNT_TARGET"};
  target.skip_if_empty = "EFS_ID";
  plan.steps.push_back(target);
  Step remove_target{"delete the mount target",
                     aws_command(o, {"efs", "delete-mount-target", "--mount-target-id",
                                     "${EFS_MOUNT_TARGET}"})};
  remove_target.skip_if_empty = "EFS_MOUNT_TARGET";
  remove_target.may_fail = true;
  plan.steps.push_back(remove_target);
  Step gone = poll("wait until the mount target is gone (a file system with one stays)",
                   aws_command(o, {"efs", "describe-mount-targets", "--file-system-id",
                                   "${EFS_ID}", "--query", "length(MountTargets)", "--output",
                                   "text"}),
                   "0", 900);
  gone.skip_if_empty = "EFS_ID";
  plan.steps.push_back(gone);
  Step remove{"delete the EFS file system",
              aws_command(o, {"efs", "delete-file-system", "--file-system-id", "${EFS_ID}"})};
  remove.skip_if_empty = "EFS_ID";
  remove.may_fail = true;
  plan.steps.push_back(remove);
}

}  // namespace

bool aws_has_storage(const AwsClusterOptions& o) { return o.storage != "none"; }

void validate_aws_storage(const AwsClusterOptions& o) {
  require(o.storage == "none" || o.storage == "fsx-lustre" || o.storage == "efs",
          "--storage must be fsx-lustre, efs or none, got '" + o.storage + "'");
  validate_shared_dir(o.shared_dir);
  if (o.storage != "fsx-lustre") return;
  const int gb = o.storage_gb;
  require(gb == 1200 || (gb >= 2400 && gb % 2400 == 0),
          "--storage-gb " + std::to_string(gb) +
              " is not a size FSx for Lustre makes: use 1200, 2400 or a multiple of 2400 GiB");
  require(o.fsx_deployment == "PERSISTENT_2" || o.fsx_deployment == "SCRATCH_2",
          "--fsx-deployment must be PERSISTENT_2 (replicated, survives a server failure) or "
          "SCRATCH_2 (not replicated), got '" + o.fsx_deployment + "'");
  const int t = o.fsx_throughput;
  require(o.fsx_deployment == "PERSISTENT_2" || t == 0,
          "--fsx-throughput is for PERSISTENT_2; SCRATCH_2's throughput follows its capacity "
          "(200 MB/s per TiB)");
  require(t == 0 || t == 125 || t == 250 || t == 500 || t == 1000,
          "--fsx-throughput must be 125, 250, 500 or 1000 MB/s per TiB, got " + std::to_string(t));
}

void add_aws_storage_create(Plan& plan, const AwsClusterOptions& o) {
  if (o.storage == "fsx-lustre") add_fsx_create(plan, o);
  if (o.storage == "efs") add_efs_create(plan, o);
}

void add_aws_storage_wait(Plan& plan, const AwsClusterOptions& o) {
  if (o.storage == "efs") {
    Step ready = poll("wait until the EFS mount target is available",
                      aws_command(o, {"efs", "describe-mount-targets", "--file-system-id",
                                      "${EFS_ID}", "--query", "MountTargets[0].LifeCycleState",
                                      "--output", "text"}),
                      "available", 900);
    ready.fail_states = kEfsFailStates;
    plan.steps.push_back(ready);
  }
  if (o.storage != "fsx-lustre") return;
  // FSx Lifecycle: a file system that is FAILED, MISCONFIGURED or being deleted does not become
  // AVAILABLE by waiting.
  Step ready = poll("wait until the FSx file system is AVAILABLE (5-15 minutes)",
                    aws_command(o, {"fsx", "describe-file-systems", "--file-system-ids",
                                    "${FSX_ID}", "--query", "FileSystems[0].Lifecycle", "--output",
                                    "text"}),
                    "AVAILABLE", 2400);
  ready.fail_states = {"FAILED", "MISCONFIGURED", "DELETING"};
  plan.steps.push_back(ready);
  plan.steps.push_back(
      {"read its mount address (<dns>@tcp:/<mount name>) for the nodes",
       aws_command(o, {"fsx", "describe-file-systems", "--file-system-ids", "${FSX_ID}", "--query",
                       "join('@tcp:/', [FileSystems[0].DNSName, "
                       "FileSystems[0].LustreConfiguration.MountName])",
                       "--output", "text"}),
       "SHARED_SOURCE"});
}

void add_aws_storage_delete(Plan& plan, const AwsClusterOptions& o) {
  if (o.keep_storage) return;
  if (o.storage == "fsx-lustre") add_fsx_delete(plan, o);
  if (o.storage == "efs") add_efs_delete(plan, o);
}

}  // namespace dsx::cloud
