// `up` and the script `up --dry-run` prints, each run against a stand-in cloud: an `aws` or
// `gcloud` first on PATH that records every call and answers as the cloud would for cluster ci.
// Both make the same pre-flight and the same waits, and stop the same way with the same message.
#include <gtest/gtest.h>

#include <cstdio>
#include <sstream>

#include "tests/cloud/temp_dir.h"
#include "tests/expect_contains.h"
#include "tests/tools/run_command.h"

using dsx::test::CommandResult;

namespace {

// FAKE_IMAGE=missing: the image (or its SSM parameter) does not exist. FAKE_FSX_STATE and
// FAKE_EFS_STATE: what the file systems' waits read. Every other call succeeds.
std::string fake_aws() {
  return "#!/bin/sh\n"
         "echo \"aws $*\" >>\"$FAKE_LOG\"\n"
         "d=" DSX_SOURCE_DIR
         "/tests/cloud/data\n"
         "missing() { [ \"$FAKE_IMAGE\" = missing ] && echo \"An error occurred ($1)\" >&2; }\n"
         "case \"$*\" in\n"
         "  *\"ssm get-parameter\"*) missing ParameterNotFound && exit 254; echo ami-0abc ;;\n"
         "  *describe-images*) missing InvalidAMIID.NotFound && exit 254; echo available ;;\n"
         "  *AvailabilityZone*) echo us-east-1a ;;\n"
         "  *VpcId*) echo vpc-0abc ;;\n"
         "  *describe-instance-type-offerings*) cat \"$d\"/aws-instance-type-offerings-p5.json ;;\n"
         "  *describe-instance-types*) cat \"$d\"/aws-instance-types-p5.json ;;\n"
         "  *get-service-quota*) cat \"$d\"/aws-service-quota-p.json ;;\n"
         "  *create-security-group*) echo sg-0new ;;\n"
         "  *\"fsx create-file-system\"*) echo fs-0new ;;\n"
         "  *\"efs create-file-system\"*) echo fs-0efs ;;\n"
         "  *.Lifecycle*) echo \"$FAKE_FSX_STATE\" ;;\n"
         "  *.LifeCycleState*) echo \"$FAKE_EFS_STATE\" ;;\n"
         "  *create-mount-target*) echo 10.0.1.200 ;;\n"
         "  *run-instances*) echo i-0new ;;\n"
         "esac\n";
}

std::string fake_gcloud() {
  return "#!/bin/sh\n"
         "echo \"gcloud $*\" >>\"$FAKE_LOG\"\n"
         "d=" DSX_SOURCE_DIR
         "/tests/cloud/data\n"
         "case \"$*\" in\n"
         "  *\"machine-types describe\"*) cat \"$d\"/gcp-machine-type-a3-highgpu-8g.json ;;\n"
         "  *\"regions describe\"*) cat \"$d\"/gcp-region-us-central1.json ;;\n"
         "  *\"images describe\"*) [ \"$FAKE_IMAGE\" = missing ] && { echo \"ERROR: The resource "
         "was not found\" >&2; exit 1; }; echo READY ;;\n"
         "esac\n";
}

class CloudUpScript : public ::testing::Test {
 protected:
  void SetUp() override {
    dsx::test::write_text(dir_ / "bin/aws", fake_aws(), true);
    dsx::test::write_text(dir_ / "bin/gcloud", fake_gcloud(), true);
  }

  // `command` with the stand-ins first on PATH, no wait between polls, `env` added.
  CommandResult run(const std::string& env, const std::string& command) {
    return dsx::test::run_command("env PATH=" + dir_ / "bin" + ":/usr/bin:/bin FAKE_LOG=" +
                                  dir_ / "calls.log" + " DSX_CLOUD_POLL_S=0 " + env + " " +
                                  command);
  }

  // `dsx cloud <flags>` as up itself, and as the script up --dry-run prints, run by bash.
  CommandResult up(const std::string& env, const std::string& flags) {
    std::remove((dir_ / "calls.log").c_str());
    return run(env, "timeout 60 " + std::string(DSX_EXE) + " cloud " + flags + " --out " +
                        dir_ / "up");
  }
  CommandResult script(const std::string& env, const std::string& flags) {
    auto printed = dsx::test::run_command("{ " + std::string(DSX_EXE) + " cloud " + flags +
                                          " --dry-run --out " + dir_ / "script" +
                                          " 2>/dev/null; } > " + dir_ / "up.sh");
    EXPECT_EQ(printed.exit_code, 0) << printed.output;
    std::remove((dir_ / "calls.log").c_str());
    return run(env, "timeout 60 bash " + dir_ / "up.sh");  // a wait that never stops fails
  }

  std::string calls() { return dsx::test::read_text(dir_ / "calls.log"); }

  // The recorded calls that are neither a describe nor a get: what would create something.
  std::string creating_calls() {
    std::istringstream in(calls());
    std::string out;
    for (std::string line; std::getline(in, line);) {
      if (line.find(" describe-") == std::string::npos && line.find(" describe ") == std::string::npos &&
          line.find(" get-") == std::string::npos && line.find("describe-from-family") == std::string::npos)
        out += line + "\n";
    }
    return out;
  }

  dsx::test::TempDir dir_;
};

constexpr const char* kAwsUp =
    "aws up --cluster ci --region us-east-1 --subnet subnet-0aaa --ssh-cidr 10.0.0.0/16";
constexpr const char* kGcpUp =
    "gcp up --cluster ci --project proj-1 --zone us-central1-a --count 1 --ssh-cidr "
    "35.235.240.0/20";

}  // namespace

// A file system that fails while up waits for it: up and the printed script stop at the first
// answer, before any node is launched, with the same message (issue 33, item 12).
TEST_F(CloudUpScript, AFailedFileSystemStopsUpAndTheScriptAtOnce) {
  struct Case {
    const char *storage, *env, *wait;
  };
  for (const Case& c :
       {Case{"fsx-lustre", "FAKE_FSX_STATE=FAILED",
             "step 'wait until the FSx file system is AVAILABLE (5-15 minutes)': the cloud "
             "reports FAILED"},
        Case{"efs", "FAKE_EFS_STATE=error",
             "step 'wait until the EFS file system is available (its mount target needs it)': "
             "the cloud reports error"}}) {
    const std::string flags = std::string(kAwsUp) + " --storage " + c.storage;
    const std::string message = std::string(c.wait) + "; see why in its console, then run down and up again";
    for (bool printed : {false, true}) {
      SCOPED_TRACE(std::string(c.storage) + (printed ? " (up.sh)" : " (up)"));
      auto r = printed ? script(c.env, flags) : up(c.env, flags);
      EXPECT_EQ(r.exit_code, 1) << r.output;
      EXPECT_CONTAINS(r.output, message);
      const std::string log = calls();
      EXPECT_CONTAINS(log, c.storage == std::string("efs") ? ".LifeCycleState" : ".Lifecycle");
      EXPECT_EQ(log.find("create-launch-template"), std::string::npos) << log;
      EXPECT_EQ(log.find("run-instances"), std::string::npos) << log;
    }
  }
}

// An image that does not exist stops up and the printed script before anything is created, with
// what to do (issue 33, item 13).
TEST_F(CloudUpScript, AMissingAwsImageStopsBeforeAnythingIsCreated) {
  const std::string message =
      "pre-flight: image ami-0bad is not available in us-east-1 (ec2 describe-images finds no "
      "such image, or it is not 'available'; aws's message, if any, is above): an AMI lives in "
      "one region; check --image and --region, copy the image there (aws ec2 copy-image), or "
      "leave --image out for the default Deep Learning AMI; nothing was created";
  for (bool printed : {false, true}) {
    SCOPED_TRACE(printed ? "up.sh" : "up");
    const std::string flags = std::string(kAwsUp) + " --image ami-0bad";
    auto r = printed ? script("FAKE_IMAGE=missing", flags) : up("FAKE_IMAGE=missing", flags);
    EXPECT_EQ(r.exit_code, 1) << r.output;
    EXPECT_CONTAINS(r.output, message);
    EXPECT_CONTAINS(r.output, "InvalidAMIID.NotFound");
    EXPECT_CONTAINS(calls(), "ec2 describe-images --image-ids ami-0bad");
    EXPECT_EQ(creating_calls(), "");
  }
  // The default image is an SSM parameter: resolved first, as run-instances would.
  auto r = up("FAKE_IMAGE=missing", kAwsUp);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_CONTAINS(r.output,
                  "pre-flight: --image resolve:ssm:/aws/service/deeplearning/ami/x86_64/"
                  "base-oss-nvidia-driver-gpu-ubuntu-22.04/latest/ami-id: SSM parameter "
                  "/aws/service/deeplearning/ami/x86_64/base-oss-nvidia-driver-gpu-ubuntu-"
                  "22.04/latest/ami-id was not found in us-east-1");
  EXPECT_EQ(creating_calls(), "");
  // An image that exists lets up go on to its first create.
  r = up("", std::string(kAwsUp) + " --image ami-0good");
  EXPECT_NE(calls().find("ec2 describe-images --image-ids ami-0good"), std::string::npos);
  EXPECT_NE(calls().find("create-security-group"), std::string::npos) << r.output;
  ASSERT_EQ(r.exit_code, 0) << r.output;
  // up ends before the nodes check themselves: it says where a failing node will be named.
  EXPECT_CONTAINS(r.output,
                  "a node that fails its set-up or the cluster bench is named by status "
                  "and hostfile, and left out of every hostfile");
}

TEST_F(CloudUpScript, AMissingGcpImageFamilyStopsBeforeAnythingIsCreated) {
  const std::string message =
      "pre-flight: image family nosuch-family has no READY image in project "
      "deeplearning-platform-release (gcloud's message, if any, is above): check --image-family "
      "and --image-project";
  for (bool printed : {false, true}) {
    SCOPED_TRACE(printed ? "up.sh" : "up");
    const std::string flags = std::string(kGcpUp) + " --image-family nosuch-family";
    auto r = printed ? script("FAKE_IMAGE=missing", flags) : up("FAKE_IMAGE=missing", flags);
    EXPECT_EQ(r.exit_code, 1) << r.output;
    EXPECT_CONTAINS(r.output, message);
    EXPECT_CONTAINS(calls(),
                    "gcloud compute images describe-from-family nosuch-family "
                    "--format=value(status) --project=deeplearning-platform-release");
    EXPECT_EQ(creating_calls(), "");
  }
  auto r = up("FAKE_IMAGE=missing", std::string(kGcpUp) + " --image my-image");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_CONTAINS(r.output, "pre-flight: image my-image is not READY in project proj-1");
  EXPECT_EQ(creating_calls(), "");
  r = up("", kGcpUp);
  EXPECT_NE(calls().find("services enable"), std::string::npos) << "a READY image lets up go on\n"
                                                                 << r.output;
}
