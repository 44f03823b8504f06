// `dsx cloud` as a user meets it: help, bad flags, render, and --dry-run printing every call.
#include <gtest/gtest.h>

#include <filesystem>

#include "tests/cloud/temp_dir.h"
#include "tests/expect_contains.h"
#include "tests/tools/run_command.h"

using dsx::test::is_usage_error;
using dsx::test::run_dsx;

TEST(CloudCli, HelpListsTheVerbs) {
  auto r = run_dsx("cloud --help");
  EXPECT_EQ(r.exit_code, 0);
  for (const char* verb : {"render", "up", "status", "hostfile", "down", "--dry-run"}) {
    EXPECT_NE(r.output.find(verb), std::string::npos) << verb;
  }
  r = run_dsx("cloud aws up --help");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.output.find("--capacity-reservation"), std::string::npos);
}

TEST(CloudCli, UnknownCloudVerbOrTypeIsAUsageError) {
  EXPECT_TRUE(is_usage_error(run_dsx("cloud azure up"), "unknown cloud 'azure'"));
  EXPECT_TRUE(is_usage_error(run_dsx("cloud aws launch"), "render|up|status|hostfile|down"));
  EXPECT_TRUE(is_usage_error(
      run_dsx("cloud aws render --cluster a --region us-east-1 --subnet subnet-1 --ssh-cidr "
              "10.0.0.0/8 --instance-type p3dn.24xlarge"),
      "p5.48xlarge"))
      << "names the supported types";
}

TEST(CloudCli, MissingOrMalformedFlagsAreNamed) {
  dsx::test::TempDir dir;
  EXPECT_TRUE(is_usage_error(
      run_dsx("cloud aws render --cluster a --region us-east-1 --ssh-cidr 10.0.0.0/8 --out " +
              dir.path()),
      "--subnet"));
  EXPECT_TRUE(is_usage_error(
      run_dsx("cloud aws render --cluster a --region us-east-1 --subnet subnet-1 --ssh-cidr "
              "10.0.0.0 --out " +
              dir.path()),
      "--ssh-cidr"));
  EXPECT_EQ(run_dsx("cloud gcp render --cluster a --project p --zone us-central1-a --ssh-cidr "
                    "10.0.0.0/8 --count x")
                .exit_code,
            2);
  EXPECT_TRUE(is_usage_error(run_dsx("cloud aws status --region us-east-1"), "cluster"));
  EXPECT_TRUE(std::filesystem::is_empty(dir.path())) << "nothing is written on a usage error";
}

TEST(CloudCli, DryRunUpPrintsEveryCallAndRunsNone) {
  dsx::test::TempDir dir;
  // An empty PATH: were any call executed instead of printed, it would fail to start.
  auto r = dsx::test::run_command(
      "env PATH= " + std::string(DSX_EXE) +
      " cloud aws up --dry-run --cluster ci --region us-east-1 --count 4 "
      "--instance-type p4d.24xlarge --subnet subnet-0aaa --ssh-cidr 10.0.0.0/16 "
      "--security-group sg-0123 --out " +
      dir.path());
  // ssh-keygen is the one local tool render needs; without PATH it reports that clearly.
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_CONTAINS(r.output, "'ssh-keygen' was not found on PATH: install OpenSSH");
  r = run_dsx(
      "cloud aws up --dry-run --cluster ci --region us-east-1 --count 4 --instance-type "
      "p4d.24xlarge "
      "--subnet subnet-0aaa --ssh-cidr 10.0.0.0/16 --security-group sg-0123 --out " +
      dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output.find("create-security-group"), std::string::npos)
      << "an existing group is used";
  EXPECT_CONTAINS(r.output,
                  "aws --region us-east-1 ec2 create-placement-group --group-name dsx-ci "
                  "--strategy cluster");
  EXPECT_CONTAINS(
      r.output,
      "ec2 run-instances --launch-template \"LaunchTemplateName=dsx-ci,Version=\\$Latest\" "
      "--count 4:4");
  EXPECT_TRUE(std::filesystem::exists(dir / "aws/launch-template.json"));
  EXPECT_FALSE(std::filesystem::exists(dir / "aws/launch-template.filled.json"))
      << "dry-run fills nothing";
  EXPECT_NE(r.output.find("with the cluster's new SSH key pair"), std::string::npos)
      << "the files --dry-run writes are said:\n" << r.output;
  // Standard output alone is the script: no notes mixed in.
  auto script = dsx::test::run_command(
      "{ " + std::string(DSX_EXE) +
      " cloud aws up --dry-run --cluster ci --region us-east-1 --count 4 --instance-type p4d.24xlarge "
      "--subnet subnet-0aaa --ssh-cidr 10.0.0.0/16 --security-group sg-0123 --out " + dir.path() +
      " 2>/dev/null; }");
  ASSERT_EQ(script.exit_code, 0);
  EXPECT_EQ(script.output.find("wrote "), std::string::npos) << script.output;
  EXPECT_CONTAINS(script.output, "create-placement-group");
  // With the security group given, the template has nothing left to fill: a copy, never a bare
  // `sed FILE > OUT`, which would read the file's name as the sed script.
  EXPECT_CONTAINS(script.output, "cp " + dir.path() + "/aws/launch-template.json " + dir.path() +
                                     "/aws/launch-template.filled.json");
  EXPECT_EQ(script.output.find("sed " + dir.path()), std::string::npos) << script.output;

  r = run_dsx(
      "cloud gcp down --dry-run --cluster ci --project proj-1 --zone us-central1-a --machine-type "
      "a3-highgpu-8g");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_CONTAINS(r.output,
                  "gcloud compute networks delete dsx-ci-gpu-4 --project=proj-1 --quiet || true");
  r = run_dsx("cloud aws status --dry-run --cluster ci --region us-east-1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_CONTAINS(r.output,
                  "ec2 describe-instances --filters Name=tag:dsx-cluster,Values=ci --output json");
}

// A3 Ultra has no on-demand capacity: up says so before it writes or creates anything, and
// takes the VMs from a reservation (bound to it) or as spot VMs.
// The dry run shows the whole way to a ready cluster: the read-only pre-flight first, the shared
// storage among the calls, and the steps each node then runs (its checks and the health bench).
TEST(CloudCli, DryRunUpShowsPreflightStorageAndTheNodesHealthSteps) {
  dsx::test::TempDir dir;
  auto aws = run_dsx(
      "cloud aws up --dry-run --cluster ci --region us-east-1 --count 2 --instance-type p5.48xlarge "
      "--subnet subnet-0aaa --ssh-cidr 10.0.0.0/16 --storage fsx-lustre --out " + dir.path());
  ASSERT_EQ(aws.exit_code, 0) << aws.output;
  const size_t preflight = aws.output.find("# pre-flight: is p5.48xlarge offered there");
  const size_t storage = aws.output.find("# create FSx for Lustre dsx-ci");
  ASSERT_NE(preflight, std::string::npos) << aws.output;
  ASSERT_NE(storage, std::string::npos) << aws.output;
  EXPECT_LT(preflight, storage);
  EXPECT_CONTAINS(aws.output, "ssh, storage, dsx, peers, report, health, ready");
  auto gcp = run_dsx(
      "cloud gcp up --dry-run --cluster ci --project p-1 --zone us-central1-a --machine-type a3-megagpu-8g "
      "--count 2 --ssh-cidr 35.235.240.0/20 --storage filestore --out " + dir.path());
  ASSERT_EQ(gcp.exit_code, 0) << gcp.output;
  EXPECT_CONTAINS(gcp.output, "gcp/startup.sh) at first boot");
  EXPECT_CONTAINS(gcp.output, "report, health, ready");
  EXPECT_CONTAINS(gcp.output, "filestore");
}

TEST(CloudCli, GcpA3UltraNeedsAReservationOrSpot) {
  auto r = run_dsx("cloud gcp up --help");
  EXPECT_EQ(r.exit_code, 0);
  for (const char* flag : {"--reservation", "--spot", "a3-ultragpu-8g"}) {
    EXPECT_NE(r.output.find(flag), std::string::npos) << flag << "\n" << r.output;
  }
  dsx::test::TempDir dir;
  const std::string up =
      "cloud gcp up --dry-run --cluster ci --project proj-1 --zone us-central1-b --count 2 "
      "--machine-type a3-ultragpu-8g --ssh-cidr 35.235.240.0/20 --out " +
      dir.path();
  r = run_dsx(up);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_CONTAINS(r.output, "pass --reservation NAME or --spot");
  EXPECT_TRUE(std::filesystem::is_empty(dir.path())) << "nothing is written on a usage error";
  r = run_dsx(up + " --reservation res-1 --spot");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_CONTAINS(r.output, "--spot and --reservation exclude each other");
  r = run_dsx(up + " --reservation res-1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* word :
       {"gcloud compute networks create dsx-ci-rdma --network-profile=us-central1-b-vpc-roce",
        "--network-interface=nic-type=MRDMA,network=dsx-ci-rdma,subnet=dsx-ci-rdma-8,no-address",
        "--reservation-affinity=specific --reservation=res-1 "
        "--provisioning-model=RESERVATION_BOUND"}) {
    EXPECT_NE(r.output.find(word), std::string::npos) << word << "\n" << r.output;
  }
  r = run_dsx(up + " --spot");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_CONTAINS(r.output, "--provisioning-model=SPOT --instance-termination-action=DELETE");
  EXPECT_NE(dsx::test::read_text(dir / "gcp/startup.sh").find("DSX_GPUDIRECT=rdma"),
            std::string::npos);
  r = run_dsx(
      "cloud gcp down --dry-run --cluster ci --project proj-1 --zone us-central1-b "
      "--machine-type a3-ultragpu-8g");
  ASSERT_EQ(r.exit_code, 0) << r.output << "down needs no capacity flag";
  EXPECT_CONTAINS(r.output, "gcloud compute networks delete dsx-ci-rdma --project=proj-1 --quiet");
}

// A real run reaches the CLI: with a stand-in `aws` that fails, up stops at the first call and
// says how to clean up.
// A stand-in `aws` that answers the pre-flight calls from the recorded responses and fails at
// the first create.
std::string fake_aws(const std::string& quota_json) {
  const std::string d = DSX_SOURCE_DIR "/tests/cloud/data/";
  return "#!/bin/sh\ncase \"$*\" in\n"
         "  *AvailabilityZone*) echo us-east-1a ;;\n"
         "  *VpcId*) echo vpc-0abc ;;\n"
         "  *\"ssm get-parameter\"*) echo ami-0abc ;;\n"
         "  *describe-images*) echo available ;;\n"
         "  *describe-instance-type-offerings*) cat " + d + "aws-instance-type-offerings-p5.json ;;\n"
         "  *describe-instance-types*) cat " + d + "aws-instance-types-p5.json ;;\n"
         "  *get-service-quota*) cat " + quota_json + " ;;\n"
         "  *) echo \"An error occurred (UnauthorizedOperation)\" >&2; exit 254 ;;\n"
         "esac\n";
}

TEST(CloudCli, AFailedCallStopsUpWithTheWayBack) {
  dsx::test::TempDir dir;
  dsx::test::write_text(dir / "bin/aws", fake_aws(DSX_SOURCE_DIR "/tests/cloud/data/aws-service-quota-p.json"), true);
  auto r =
      dsx::test::run_command("env PATH=" + dir / "bin" + ":/usr/bin:/bin " + std::string(DSX_EXE) +
                             " cloud aws up --cluster ci --region us-east-1 --subnet subnet-0aaa "
                             "--ssh-cidr 10.0.0.0/16 --out " +
                             dir / "out");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_CONTAINS(r.output, "UnauthorizedOperation");
  EXPECT_CONTAINS(r.output, "step 'create security group dsx-ci' failed: aws exited with 254");
  EXPECT_CONTAINS(r.output, "dsx cloud aws down --cluster ci --region us-east-1");
}

// A pre-flight failure stops up before anything exists: no create call, no `down` to run.
TEST(CloudCli, PreflightStopsUpBeforeTheFirstCreate) {
  dsx::test::TempDir dir;
  dsx::test::write_text(dir / "quota.json", "{\"Quota\": {\"QuotaCode\": \"L-417A185B\", \"Value\": 192.0}}");
  dsx::test::write_text(dir / "bin/aws", fake_aws(dir / "quota.json"), true);
  auto r =
      dsx::test::run_command("env PATH=" + dir / "bin" + ":/usr/bin:/bin " + std::string(DSX_EXE) +
                             " cloud aws up --cluster ci --region us-east-1 --subnet subnet-0aaa "
                             "--ssh-cidr 10.0.0.0/16 --count 2 --out " + dir / "out");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_CONTAINS(r.output,
                  "pre-flight found 1 problem(s); nothing was created:\n  - 2 x p5.48xlarge "
                  "need 384 vCPUs");
  EXPECT_EQ(r.output.find("create security group"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("down --cluster"), std::string::npos) << r.output;
}
