// Every AWS CLI call dsx makes is checked against the EC2/IAM/SSM API models by Debian's awscli:
// it validates parameters (names, types, JSON shapes of file:// documents) before it sends
// anything, so each rendered command is run with dummy credentials against a closed loopback
// port. A valid call gets as far as the network and fails to connect (exit 255, "Could not
// connect to the endpoint URL"); a bad one stops at validation (exit 252). Nothing leaves
// 127.0.0.1. The commands run through awscli's own driver in one process (awscli_batch.py),
// because starting the CLI once per command would take minutes.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>

#include "cloud/aws_plan.h"
#include "cloud/aws_render.h"
#include "cloud/instance_types.h"
#include "cloud/plan.h"
#include "tests/cloud/ci_cluster.h"
#include "tests/cloud/temp_dir.h"
#include "tests/tools/run_command.h"

using namespace dsx::cloud;
using dsx::test::TempDir;

namespace {

constexpr const char* kAws =
    "/usr/bin/aws";  // Debian's awscli (tools/setup.sh): its Python package runs the checks

// A loopback port nobody listens on: bound, read, and closed again.
int closed_port() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  socklen_t len = sizeof addr;
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  close(fd);
  return ntohs(addr.sin_port);
}

class CloudAwsCli : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(kAws))
      GTEST_FAIL() << kAws << " is missing: run tools/setup.sh (Debian package awscli)";
    endpoint_ = "http://127.0.0.1:" + std::to_string(closed_port());
  }

  // Runs each `aws ...` (argv[0] == "aws") with dummy credentials, no config files, one attempt.
  std::vector<dsx::test::CommandResult> run(
      const std::vector<std::vector<std::string>>& commands) const {
    rapidjson::StringBuffer json;
    rapidjson::Writer<rapidjson::StringBuffer> writer(json);
    writer.StartArray();
    for (const auto& argv : commands) {
      EXPECT_EQ(argv.at(0), "aws");
      writer.StartArray();
      for (const char* global : {"--endpoint-url", "", "--cli-connect-timeout", "1"}) {
        writer.String(*global ? global : endpoint_.c_str());
      }
      for (size_t i = 1; i < argv.size(); ++i) writer.String(argv[i].c_str());
      writer.EndArray();
    }
    writer.EndArray();
    dsx::test::write_text(home_ / "commands.json", json.GetString());
    std::string command = "cd " + home_.path() +
                          " && env -i PATH=/usr/bin:/bin HOME=" + home_.path() +
                          " AWS_ACCESS_KEY_ID=AKIAIOSFODNN7EXAMPLE"
                          " AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMIK7MDENGbPxRfiCYEXAMPLEKEY"
                          " AWS_CONFIG_FILE=/dev/null AWS_SHARED_CREDENTIALS_FILE=/dev/null"
                          " AWS_EC2_METADATA_DISABLED=true AWS_MAX_ATTEMPTS=1 AWS_PAGER= "
                          "/usr/bin/python3 " DSX_SOURCE_DIR
                          "/tests/cloud/awscli_batch.py commands.json"
                          " 2>" +
                          home_.path() + "/stderr.txt";
    auto r = dsx::test::run_command(command);
    rapidjson::Document results;
    results.Parse(r.output.c_str());
    std::vector<dsx::test::CommandResult> out;
    if (r.exit_code != 0 || !results.IsArray() || results.Size() != commands.size()) {
      ADD_FAILURE() << "awscli_batch.py failed (" << r.exit_code << "): " << r.output
                    << dsx::test::read_text(home_ / "stderr.txt");
      return out;
    }
    for (const auto& item : results.GetArray()) {
      out.push_back({item["exit_code"].GetInt(), item["output"].GetString()});
    }
    return out;
  }

  // Runs every step of `plan` as `up`/`down` would, with plausible values for the captures.
  void expect_every_call_valid(const Plan& plan) {
    Vars vars = {{"VPC_ID", "vpc-0123456789abcdef0"},
                 {"SUBNET_AZ", "us-east-1a"},
                 {"IMAGE_ID", "ami-0123456789abcdef0"},
                 {"SG_ID", "sg-0123456789abcdef0"},
                 {"FSX_ID", "fs-0123456789abcdef0"},
                 {"EFS_ID", "fs-0123abcd"},
                 {"EFS_MOUNT_TARGET", "fsmt-0123abcd"},
                 {"SHARED_SOURCE", "fs-0123456789abcdef0.fsx.us-east-1.amazonaws.com@tcp:/abcdefgh"},
                 {"INSTANCE_IDS", "i-0123456789abcdef0 i-0fedcba9876543210"}};
    const auto lists = list_captures(plan);
    std::vector<std::vector<std::string>> commands;
    for (const auto& step : plan.steps) {
      if (!step.fill_from.empty()) {
        dsx::test::write_text(step.fill_to, fill_vars(dsx::test::read_text(step.fill_from), vars));
      }
      commands.push_back(resolve_argv(step, vars, lists));
    }
    auto results = run(commands);
    ASSERT_EQ(results.size(), plan.steps.size());
    for (size_t i = 0; i < results.size(); ++i) {
      const auto& r = results[i];
      const auto& what = plan.steps[i].what;
      EXPECT_EQ(r.exit_code, 255) << what << "\n" << r.output;
      EXPECT_NE(r.output.find("Could not connect to the endpoint URL"), std::string::npos)
          << what << "\n"
          << r.output;
      EXPECT_EQ(r.output.find("Parameter validation failed"), std::string::npos) << what << "\n"
                                                                                 << r.output;
    }
  }

  AwsClusterOptions options(const std::string& type) const {
    AwsClusterOptions o = dsx::test::ci_aws_cluster("us-east-1");
    o.instance_type = type;
    o.count = 2;
    o.subnet = "subnet-0aaa1111bbbb2222c";
    o.ssh_cidr = "10.20.0.0/16";
    o.key_name = "dsx-key";
    o.dsx_package = "s3://dsx-artifacts/dsx-0.1.0.tar.gz";
    o.out_dir = out_.path();
    return o;
  }

  TempDir home_, out_;
  std::string endpoint_;
};

}  // namespace

TEST_F(CloudAwsCli, EveryCallOfAP5ClusterPassesTheApiChecks) {
  auto o = options("p5.48xlarge");
  render_aws(o);
  Plan all = aws_up_plan(o);
  for (auto& step : aws_down_plan(o).steps) all.steps.push_back(step);
  all.steps.push_back(aws_describe_step(o));
  expect_every_call_valid(all);
}

// Shared storage: the FSx and EFS calls of up and down (and the launch template with its tag and
// metadata option) pass the FSx, EFS and EC2 models.
TEST_F(CloudAwsCli, EveryStorageCallPassesTheApiChecks) {
  Plan all{"storage", {}};
  for (const char* kind : {"fsx-lustre", "efs"}) {
    auto o = options("p5.48xlarge");
    o.storage = kind;
    o.out_dir = out_ / kind;
    render_aws(o);
    for (auto& step : aws_up_plan(o).steps) all.steps.push_back(step);
    for (auto& step : aws_down_plan(o).steps) all.steps.push_back(step);
  }
  auto scratch = options("p4d.24xlarge");
  scratch.storage = "fsx-lustre";
  scratch.fsx_deployment = "SCRATCH_2";
  scratch.storage_gb = 2400;
  for (auto& step : aws_up_plan(scratch).steps) {
    if (step.argv.size() > 4 && step.argv[4] == "create-file-system") all.steps.push_back(step);
  }
  expect_every_call_valid(all);
}

TEST_F(CloudAwsCli, P4dInACapacityBlockWithGivenGroupAndProfilePassesTheApiChecks) {
  auto o = options("p4d.24xlarge");
  o.security_group = "sg-0aaaabbbbccccdddd";
  o.instance_profile = "my-training-nodes";
  o.capacity_reservation = "cr-0123456789abcdef0";
  o.capacity_block = true;
  o.efa_only = false;
  o.image = "ami-0123456789abcdef0";
  o.root_device = "/dev/xvda";
  render_aws(o);
  expect_every_call_valid(aws_up_plan(o));
}

TEST_F(CloudAwsCli, TheLaunchTemplateOfEveryInstanceTypePassesTheApiChecks) {
  Plan templates{"every type", {}};
  for (const auto& type : aws_instance_types()) {
    auto o = options(std::string(type.name));
    o.out_dir = out_ / o.instance_type;
    render_aws(o);
    for (const auto& step : aws_up_plan(o).steps) {
      if (!step.fill_from.empty()) templates.steps.push_back(step);
    }
  }
  ASSERT_EQ(templates.steps.size(), aws_instance_types().size());
  expect_every_call_valid(templates);
}

// The check can fail: a launch template with a wrong type or an unknown key stops at validation.
TEST_F(CloudAwsCli, ABrokenLaunchTemplateIsCaughtBeforeTheNetwork) {
  auto o = options("p4d.24xlarge");
  render_aws(o);
  std::string json = dsx::test::read_text(out_.path() + "/aws/launch-template.json");
  std::string wrong_type = json, unknown_key = json;
  wrong_type.replace(wrong_type.find("\"DeviceIndex\": 0"), 16, "\"DeviceIndex\": \"0\"");
  unknown_key.replace(unknown_key.find("\"NetworkCardIndex\""), 18, "\"NetworkCardIdx\"");
  std::vector<std::vector<std::string>> commands;
  const std::vector<std::pair<std::string, std::string>> files = {
      {"wrong-type.json", wrong_type}, {"unknown-key.json", unknown_key}};
  for (const auto& [name, broken] : files) {
    dsx::test::write_text(out_ / name, broken);
    commands.push_back({"aws", "--region", "us-east-1", "ec2", "create-launch-template",
                        "--launch-template-name", "dsx-ci", "--launch-template-data",
                        "file://" + (out_ / name)});
  }
  commands.push_back({"aws", "--region", "us-east-1", "ec2", "create-placement-group",
                      "--group-name", "dsx-ci", "--strategy", "cluster", "--tag-specifications",
                      "ResourceType=placement-group,Tags=[{Key=a}"});
  for (const auto& r : run(commands)) {
    EXPECT_EQ(r.exit_code, 252) << r.output;
    EXPECT_TRUE(r.output.find("Parameter validation failed") != std::string::npos ||
                r.output.find("Error parsing parameter") != std::string::npos)
        << r.output;
  }
}

// The calls the node script makes for the cluster bench and the shared storage's address, as
// cloud/aws/user-data.sh writes them (with the values of a run).
TEST_F(CloudAwsCli, TheNodeScriptsBenchCallsPassTheApiChecks) {
  const std::vector<std::string> aws = {"aws", "--region", "us-east-1", "--cli-connect-timeout",
                                        "10", "--cli-read-timeout", "60"};
  auto with = [&](std::vector<std::string> words) {
    std::vector<std::string> argv = aws;
    argv.insert(argv.end(), words.begin(), words.end());
    return argv;
  };
  auto results = run(
      {with({"ec2", "create-tags", "--resources", "i-0123456789abcdef0", "--tags",
             "Key=dsx-ready,Value=checked"}),
       with({"ec2", "create-tags", "--resources", "i-0123456789abcdef0", "--tags",
             "Key=dsx-busbw,Value=78.5", "Key=dsx-busbw-all,Value=78.5", "Key=dsx-health,Value=ok"}),
       with({"ec2", "describe-instances", "--output", "text", "--filters",
             "Name=tag:dsx-cluster,Values=ci", "Name=instance-state-name,Values=running", "--query",
             "Reservations[].Instances[].[PrivateIpAddress,InstanceId,Tags[?Key=='dsx-ready']|[0]."
             "Value,Tags[?Key=='dsx-health']|[0].Value]"})});
  ASSERT_EQ(results.size(), 3u);
  for (const auto& r : results) {
    EXPECT_EQ(r.exit_code, 255) << r.output;
    EXPECT_NE(r.output.find("Could not connect to the endpoint URL"), std::string::npos) << r.output;
  }
  const std::string script = dsx::test::read_text(DSX_SOURCE_DIR "/cloud/aws/user-data.sh");
  EXPECT_NE(script.find("\"Key=dsx-busbw,Value=$2\" \"Key=dsx-busbw-all,Value=$3\" "
                        "\"Key=dsx-health,Value=$4\""),
            std::string::npos)
      << "the script's tag call changed: update this test";
  EXPECT_NE(script.find("Tags[?Key=='dsx-ready']|[0].Value,Tags[?Key=='dsx-health']|[0].Value]"),
            std::string::npos);
}
