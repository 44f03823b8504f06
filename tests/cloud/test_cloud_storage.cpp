// Shared storage in the plans: what up creates and waits for before the nodes start, how the
// nodes learn its address, what down deletes (and leaves with --keep-storage), and the flags'
// checks.
#include <gtest/gtest.h>

#include <algorithm>

#include "cloud/aws_plan.h"
#include "cloud/aws_render.h"
#include "cloud/gcp_plan.h"
#include "dsx/error.h"
#include "tests/cloud/ci_cluster.h"
#include "tests/cloud/temp_dir.h"

using namespace dsx::cloud;

namespace {

AwsClusterOptions aws_options(const std::string& storage) {
  AwsClusterOptions o = dsx::test::ci_aws_cluster("us-east-1");
  o.storage = storage;
  return o;
}

GcpClusterOptions gcp_options() {
  GcpClusterOptions o = dsx::test::ci_gcp_cluster();
  o.storage = "filestore";
  return o;
}

// The index of the first step whose words include all of `words`, or -1.
int find_step(const Plan& plan, const std::vector<std::string>& words) {
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    const auto& argv = plan.steps[i].argv;
    if (std::all_of(words.begin(), words.end(), [&](const std::string& w) {
          return std::find(argv.begin(), argv.end(), w) != argv.end();
        }))
      return int(i);
  }
  return -1;
}

std::string usage_error(const AwsClusterOptions& o) {
  try {
    validate(o);
  } catch (const dsx::Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(CloudStorage, FsxIsCreatedInTheClusterSubnetAndAvailableBeforeTheNodes) {
  auto o = aws_options("fsx-lustre");
  o.storage_gb = 4800;
  o.fsx_throughput = 1000;
  const Plan plan = aws_up_plan(o);
  const int create = find_step(plan, {"create-file-system"});
  ASSERT_GE(create, 0);
  const auto& argv = plan.steps[create].argv;
  for (const char* word : {"LUSTRE", "4800", "subnet-0aaa", "${SG_ID}",
                           "DeploymentType=PERSISTENT_2,PerUnitStorageThroughput=1000",
                           "Key=dsx-cluster,Value=ci"}) {
    EXPECT_NE(std::find(argv.begin(), argv.end(), word), argv.end()) << word;
  }
  EXPECT_GT(create, find_step(plan, {"create-security-group"}));
  const int wait = find_step(plan, {"describe-file-systems", "FileSystems[0].Lifecycle"});
  ASSERT_GE(wait, 0);
  EXPECT_EQ(plan.steps[wait].until, "AVAILABLE");
  EXPECT_EQ(plan.steps[wait].fail_states,
            (std::vector<std::string>{"FAILED", "MISCONFIGURED", "DELETING"}));
  const int source = find_step(plan, {"describe-file-systems", "--file-system-ids"}) + 1;
  EXPECT_EQ(plan.steps[source].capture, "SHARED_SOURCE");
  EXPECT_LT(wait, find_step(plan, {"create-launch-template"}));
  EXPECT_LT(find_step(plan, {"create-launch-template"}), find_step(plan, {"run-instances"}));
}

TEST(CloudStorage, ScratchFsxTakesNoThroughputFlag) {
  auto o = aws_options("fsx-lustre");
  o.fsx_deployment = "SCRATCH_2";
  const Plan plan = aws_up_plan(o);
  const auto& argv = plan.steps[find_step(plan, {"create-file-system"})].argv;
  EXPECT_NE(std::find(argv.begin(), argv.end(), "DeploymentType=SCRATCH_2"), argv.end());
}

TEST(CloudStorage, EfsGetsAMountTargetInTheSubnetAndWaitsForIt) {
  auto o = aws_options("efs");
  o.security_group = "sg-0given";
  const Plan plan = aws_up_plan(o);
  const int create = find_step(plan, {"efs", "create-file-system", "elastic", "--encrypted"});
  const int target = find_step(plan, {"create-mount-target", "subnet-0aaa", "sg-0given"});
  const int ready = find_step(plan, {"describe-mount-targets", "MountTargets[0].LifeCycleState"});
  ASSERT_GE(create, 0);
  ASSERT_GT(target, create);
  EXPECT_EQ(plan.steps[target].capture, "SHARED_SOURCE");
  ASSERT_GT(ready, target);
  EXPECT_EQ(plan.steps[ready].until, "available");
  EXPECT_EQ(plan.steps[ready].fail_states,
            (std::vector<std::string>{"error", "deleting", "deleted"}));
  EXPECT_LT(ready, find_step(plan, {"run-instances"}));
}

// The launch template tags each node with the address up captured, readable from its metadata.
TEST(CloudStorage, LaunchTemplateTellsTheNodesWhereTheStorageIs) {
  dsx::test::TempDir dir;
  auto o = aws_options("fsx-lustre");
  o.out_dir = dir.path();
  render_aws(o);
  std::string json = dsx::test::read_text(dir / "aws/launch-template.json");
  EXPECT_NE(json.find("\"Key\": \"dsx-shared-source\",\n          \"Value\": \"${SHARED_SOURCE}\""),
            std::string::npos)
      << json;
  EXPECT_NE(json.find("\"InstanceMetadataTags\": \"enabled\""), std::string::npos);
  EXPECT_NE(dsx::test::read_text(dir / "aws/user-data.sh").find("DSX_STORAGE=fsx-lustre\n"),
            std::string::npos);
  o.storage = "none";
  render_aws(o);
  json = dsx::test::read_text(dir / "aws/launch-template.json");
  EXPECT_EQ(json.find("dsx-shared-source"), std::string::npos);
  EXPECT_EQ(json.find("InstanceMetadataTags"), std::string::npos);
}

TEST(CloudStorage, DownDeletesTheFileSystemBeforeTheSecurityGroupUnlessKept) {
  for (const char* kind : {"fsx-lustre", "efs"}) {
    auto o = aws_options(kind);
    Plan plan = aws_down_plan(o);
    const int gone = find_step(plan, {std::string(kind) == "efs" ? "length(MountTargets)"
                                                                 : "length(FileSystems[?Tags[?Key=="
                                                                   "'dsx-cluster' && Value=='ci']])"});
    ASSERT_GE(gone, 0) << kind;
    EXPECT_GT(gone, find_step(plan, {"wait", "instance-terminated"})) << kind;
    EXPECT_LT(gone, find_step(plan, {"delete-security-group"})) << kind;
    o.keep_storage = true;
    plan = aws_down_plan(o);
    EXPECT_EQ(find_step(plan, {std::string(kind) == "efs" ? "efs" : "fsx"}), -1) << kind;
    EXPECT_EQ(find_step(plan, {"delete-security-group"}), -1) << "the kept storage still uses it";
  }
  const Plan efs = aws_down_plan(aws_options("efs"));
  EXPECT_LT(find_step(efs, {"delete-mount-target"}), find_step(efs, {"efs", "delete-file-system"}));
}

TEST(CloudStorage, FlagsAreCheckedWithTheValuesThatWork) {
  auto o = aws_options("fsx-lustre");
  o.storage_gb = 3600;
  EXPECT_NE(usage_error(o).find("use 1200, 2400 or a multiple of 2400 GiB"), std::string::npos)
      << usage_error(o);
  o.storage_gb = 2400;
  o.fsx_throughput = 300;
  EXPECT_NE(usage_error(o).find("125, 250, 500 or 1000"), std::string::npos);
  o.fsx_deployment = "SCRATCH_2";
  o.fsx_throughput = 250;
  EXPECT_NE(usage_error(o).find("--fsx-throughput is for PERSISTENT_2"), std::string::npos);
  o.fsx_throughput = 0;
  EXPECT_EQ(usage_error(o), "");
  o.storage = "s3";
  EXPECT_NE(usage_error(o).find("--storage must be fsx-lustre, efs or none"), std::string::npos);
  o.storage = "efs";
  o.shared_dir = "shared";
  EXPECT_NE(usage_error(o).find("--shared-dir must be an absolute path"), std::string::npos);

  auto g = gcp_options();
  g.storage_gb = 1024;  // BASIC_SSD starts at 2.5 TiB
  EXPECT_THROW(validate(g), dsx::Error);
  g.filestore_tier = "BASIC_HDD";
  EXPECT_NO_THROW(validate(g));
  g.filestore_tier = "PREMIUM";
  EXPECT_THROW(validate(g), dsx::Error);
}

TEST(CloudStorage, FilestoreIsReadyBeforeTheTemplateAndItsAddressGoesInTheMetadata) {
  const auto o = gcp_options();
  const Plan plan = gcp_up_plan(o);
  const int create = find_step(plan, {"filestore", "instances", "create", "dsx-ci"});
  ASSERT_GE(create, 0);
  const auto& argv = plan.steps[create].argv;
  for (const char* word : {"--zone=us-central1-a", "--tier=BASIC_SSD",
                           "--file-share=name=shared,capacity=2560GiB", "--network=name=default",
                           "--labels=dsx-cluster=ci"}) {
    EXPECT_NE(std::find(argv.begin(), argv.end(), word), argv.end()) << word;
  }
  EXPECT_EQ(plan.steps[create + 1].capture, "FILESTORE_IP");
  const int tmpl = find_step(
      plan, {"--metadata=install-nvidia-driver=True,dsx-cluster=ci,"
             "dsx-shared-source=${FILESTORE_IP}:/shared"});
  EXPECT_GT(tmpl, create + 1);
  EXPECT_GE(find_step(plan, {"services", "enable", "file.googleapis.com"}), 0);

  Plan down = gcp_down_plan(o);
  const int remove = find_step(down, {"filestore", "instances", "delete", "dsx-ci"});
  EXPECT_GT(remove, find_step(down, {"compute", "instances", "delete"}));
  auto kept = o;
  kept.keep_storage = true;
  EXPECT_EQ(find_step(gcp_down_plan(kept), {"filestore"}), -1);
}
