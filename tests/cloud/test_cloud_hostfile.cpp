// Hostfiles and status from recorded `aws ec2 describe-instances` and `gcloud compute instances
// list` JSON (tests/cloud/data), through the library and through `dsx cloud ... hostfile`.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>

#include "cloud/cloud_nodes.h"
#include "cloud/health_reference.h"
#include "dsx/error.h"
#include "tests/cloud/temp_dir.h"
#include "tests/expect_contains.h"
#include "tests/tools/run_command.h"

using namespace dsx::cloud;
using dsx::test::read_text;
using dsx::test::run_dsx;

namespace {
const std::string kData = DSX_SOURCE_DIR "/tests/cloud/data/";
}

TEST(CloudHostfile, AwsRunningNodesInAddressOrder) {
  auto nodes = parse_aws_describe_instances(read_text(kData + "aws-describe-instances.json"));
  ASSERT_EQ(nodes.size(), 6u);
  EXPECT_EQ(nodes[0].id, "i-0aaa00000000000a1");
  EXPECT_EQ(nodes[0].ready, "yes");
  EXPECT_EQ(nodes[2].ready, "failed-efa");
  EXPECT_EQ(nodes[3].state, "terminated");
  EXPECT_EQ(nodes[4].private_ip, "");
  // Terminated and pending nodes are left out, and so is one whose set-up failed (10.0.2.200);
  // 10.0.1.9 < 10.0.1.10 < 10.0.1.12.
  EXPECT_EQ(render_hostfile(nodes, 8), "10.0.1.9 slots=8\n10.0.1.10 slots=8\n10.0.1.12 slots=8\n");
  EXPECT_EQ(left_out_of_hostfile(nodes),
            std::vector<std::string>{"i-0bbb00000000000b1 (10.0.2.200, dsx-ready=failed-efa)"});
}

TEST(CloudHostfile, TheOrderDoesNotDependOnTheListingOrder) {
  auto nodes = parse_aws_describe_instances(read_text(kData + "aws-describe-instances.json"));
  auto reversed = nodes;
  std::reverse(reversed.begin(), reversed.end());
  EXPECT_EQ(render_hostfile(nodes, 8), render_hostfile(reversed, 8));
}

TEST(CloudHostfile, GcpRunningVmsByPrimaryAddress) {
  auto nodes = parse_gcp_instances_list(read_text(kData + "gcloud-instances-list.json"));
  ASSERT_EQ(nodes.size(), 3u);
  EXPECT_EQ(nodes[0].id, "dsx-ci-0002");
  EXPECT_EQ(nodes[0].private_ip, "10.128.0.21") << "NIC 0, not a GPU NIC";
  EXPECT_EQ(nodes[2].state, "staging");
  // The cluster bench found 10.128.0.3 slow: it is no rank of any job (issue 33, item 14).
  EXPECT_EQ(render_hostfile(nodes, 8), "10.128.0.21 slots=8\n");
  EXPECT_EQ(left_out_of_hostfile(nodes),
            std::vector<std::string>{"dsx-ci-0001 (10.128.0.3, dsx-health=slow)"});
}

TEST(CloudHostfile, StatusCountsReadyNodes) {
  auto nodes = parse_aws_describe_instances(read_text(kData + "aws-describe-instances.json"));
  std::string status = render_status(nodes, 4);
  EXPECT_CONTAINS(status, "4 of 4 nodes running, 2 ready");
  EXPECT_CONTAINS(status, "i-0bbb00000000000b1    10.0.2.200       running      failed-efa");
  EXPECT_NE(status.find("i-0bbb00000000000b4    10.0.1.10        running      (setting up)"),
            std::string::npos);
  EXPECT_NE(status.find("i-0bbb00000000000b2    10.0.1.100       terminated   -"),
            std::string::npos);
}

TEST(CloudHostfile, MalformedListingsSayWhatIsWrong) {
  EXPECT_THROW(parse_aws_describe_instances("{\"Reservations\": [{\"Instances\": [}"), dsx::Error);
  EXPECT_THROW(parse_aws_describe_instances("{\"Instances\": []}"), dsx::Error);
  EXPECT_THROW(parse_gcp_instances_list("{}"), dsx::Error);
  try {
    parse_aws_describe_instances("i-0123 10.0.0.1");
    FAIL();
  } catch (const dsx::Error& e) {
    EXPECT_EQ(e.kind(), dsx::ErrorKind::Format);
    EXPECT_NE(std::string(e.what()).find("--output json"), std::string::npos) << e.what();
  }
  std::vector<CloudNode> bad = {{"i-1", "10.0.0.300", "running", "", "", "", ""}};
  EXPECT_THROW(render_hostfile(bad, 8), dsx::Error);
}

TEST(CloudHostfile, CommandWritesTheFileFromASavedListing) {
  dsx::test::TempDir dir;
  auto r = run_dsx(
      "cloud aws hostfile --cluster ci --region us-east-1 --instance-type p4d.24xlarge "
      "--from-json " +
      kData + "aws-describe-instances.json --hostfile " + dir / "hostfile");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(read_text(dir / "hostfile"),
            "10.0.1.9 slots=8\n10.0.1.10 slots=8\n10.0.1.12 slots=8\n");
  EXPECT_CONTAINS(r.output,
                  "dsx: left out of the hostfile: i-0bbb00000000000b1 (10.0.2.200, "
                  "dsx-ready=failed-efa); replace them (docs/cloud.md 1.5)");
  EXPECT_NE(r.output.find("i-0bbb00000000000b4 has not reported ready (dsx-ready=unset)"),
            std::string::npos)
      << "a node still setting up stays, with a warning\n"
      << r.output;

  r = run_dsx("cloud gcp hostfile --cluster ci --project proj-1 --zone us-central1-a --from-json " +
              kData + "gcloud-instances-list.json --out " + dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(read_text(dir / "hostfile"), "10.128.0.21 slots=8\n");
  EXPECT_CONTAINS(r.output, "left out of the hostfile: dsx-ci-0001 (10.128.0.3, dsx-health=slow)");
}

TEST(CloudHostfile, TooFewNodesIsAnErrorNotAShortHostfile) {
  dsx::test::TempDir dir;
  auto r = run_dsx(
      "cloud gcp hostfile --cluster ci --project proj-1 --zone us-central1-a --expect 3 "
      "--from-json " +
      kData + "gcloud-instances-list.json --out " + dir.path());
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_CONTAINS(r.output,
                  "only 1 of 3 nodes are running and healthy (left out: dsx-ci-0001 "
                  "(10.128.0.3, dsx-health=slow))");
  EXPECT_FALSE(std::filesystem::exists(dir / "hostfile"));
}

TEST(CloudHostfile, StatusThroughTheCommand) {
  // Without --count, status expects the nodes it finds alive (5 here: one is terminated).
  auto r = run_dsx("cloud aws status --cluster ci --region us-east-1 --from-json " + kData +
                   "aws-describe-instances.json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_CONTAINS(r.output, "4 of 5 nodes running, 2 ready");
  // --count doubles as the expectation of hostfile.
  dsx::test::TempDir dir;
  r = run_dsx("cloud aws hostfile --cluster ci --region us-east-1 --count 6 --out " + dir.path() +
              " --from-json " + kData + "aws-describe-instances.json");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_CONTAINS(r.output, "only 3 of 6 nodes are running and healthy");
}

// hostfile --wait polls the CLI until every node reports ready: here a stand-in `aws` answers
// with one node ready the first time and both the second.
TEST(CloudHostfile, WaitPollsUntilTheNodesAreReady) {
  dsx::test::TempDir dir;
  const std::string one_ready =
      R"({"Reservations":[{"Instances":[{"InstanceId":"i-1","PrivateIpAddress":"10.0.0.20","State":{"Name":"running"},"Tags":[{"Key":"dsx-ready","Value":"yes"}]},)"
      R"({"InstanceId":"i-2","PrivateIpAddress":"10.0.0.3","State":{"Name":"running"}}]}]})";
  std::string both_ready = one_ready;
  both_ready.replace(both_ready.rfind("}}]}]}"), 6,
                     R"(},"Tags":[{"Key":"dsx-ready","Value":"yes"}]}]}]})");
  dsx::test::write_text(dir / "1.json", one_ready);
  dsx::test::write_text(dir / "2.json", both_ready);
  dsx::test::write_text(dir / "bin/aws",
                        "#!/bin/sh\nn=$(cat " + dir / "calls" +
                            " 2>/dev/null || echo 0)\nn=$((n + 1))\necho $n > " + dir / "calls" +
                            "\ncat " + dir.path() + "/$(( n < 2 ? n : 2 )).json\n",
                        true);
  auto r = dsx::test::run_command(
      "env DSX_CLOUD_POLL_S=0 PATH=" + dir / "bin" + ":/usr/bin:/bin " + std::string(DSX_EXE) +
      " cloud aws hostfile --cluster ci --region us-east-1 --count 2 --wait 30 --out " +
      dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_CONTAINS(r.output, "1 of 2 nodes ready; checking again");
  EXPECT_EQ(read_text(dir / "calls"), "2\n");
  EXPECT_EQ(read_text(dir / "hostfile"), "10.0.0.3 slots=8\n10.0.0.20 slots=8\n");
  EXPECT_EQ(r.output.find("has not reported ready"), std::string::npos) << r.output;

  r = run_dsx("cloud aws status --cluster ci --region us-east-1 --wait 5 --from-json " +
              dir / "1.json");
  EXPECT_EQ(r.exit_code, 2) << "--wait without a count: " << r.output;
}

// status shows each node's bench figure (GCP's 49_8 read as 49.8), a slow node as such, and the
// cluster's all-nodes figure beside the reference recorded for the machine, or says none is.
TEST(CloudHostfile, StatusShowsTheBenchFiguresBesideTheReference) {
  auto gcp = parse_gcp_instances_list(read_text(kData + "gcloud-instances-list.json"));
  ASSERT_EQ(gcp.size(), 3u);
  EXPECT_EQ(gcp[0].busbw, "49.8");
  EXPECT_EQ(gcp[0].busbw_all, "48.1");
  std::string status = render_status(gcp, 3, health_reference_line("a3-highgpu-8g"));
  EXPECT_CONTAINS(status,
                  "dsx-ci-0002            10.128.0.21      running      yes            49.8\n");
  EXPECT_CONTAINS(status, "failed-health  12.0 slow\n");
  EXPECT_CONTAINS(status, "not in the hostfile: dsx-ci-0001 (10.128.0.3, dsx-health=slow)\n");
  EXPECT_CONTAINS(status,
                  "cluster bench: 48.1 GB/s busbw over all nodes; per node, its better "
                  "neighbour pair; reference: 2 x a3-highgpu-8g (TCPX): all_gather busbw "
                  "~50 GB/s\n");

  auto aws = parse_aws_describe_instances(read_text(kData + "aws-describe-instances.json"));
  status = render_status(aws, 4, health_reference_line("p5.48xlarge"));
  EXPECT_CONTAINS(status, "reference: 2 x p5: all_reduce busbw 487 GB/s at 16 GiB");
  EXPECT_CONTAINS(status, "cluster bench: 471.0 GB/s");
  EXPECT_EQ(std::string(health_reference_line("p5en.48xlarge")), "reference: none recorded");
  EXPECT_EQ(std::string(health_reference_line("a2-highgpu-8g")), "reference: none recorded");
  std::vector<CloudNode> fresh = {{"i-1", "10.0.0.1", "running", "checked", "", "", ""}};
  EXPECT_NE(render_status(fresh, 1, "reference: none recorded")
                .find("cluster bench: not run yet (the lowest node runs it once every node passed "
                      "its checks); reference: none recorded"),
            std::string::npos);
}

TEST(CloudHostfile, StatusCommandPrintsTheReferenceOfTheType) {
  auto r = run_dsx("cloud aws status --cluster ci --region us-east-1 --instance-type p4d.24xlarge "
                   "--from-json " + kData + "aws-describe-instances.json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_CONTAINS(r.output,
                  "reference: 2 x p4de (same 4 x 100 Gbps EFA): all_reduce busbw 78.3 GB/s "
                  "at 2 GiB");
}
