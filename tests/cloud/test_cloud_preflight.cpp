// Pre-flight checks judged on recorded CLI responses (tests/cloud/data, written from the
// documented response shapes): each failure names what to change, and up stops before creating
// anything.
#include <gtest/gtest.h>

#include <sstream>

#include "cloud/aws_plan.h"
#include "cloud/aws_preflight.h"
#include "cloud/gcp_plan.h"
#include "cloud/gcp_preflight.h"
#include "dsx/error.h"
#include "tests/cloud/ci_cluster.h"
#include "tests/cloud/temp_dir.h"

using namespace dsx::cloud;
using dsx::test::read_text;

namespace {

std::string data(const std::string& name) {
  return read_text(std::string(DSX_SOURCE_DIR) + "/tests/cloud/data/" + name);
}

AwsClusterOptions aws_options() {
  AwsClusterOptions o = dsx::test::ci_aws_cluster("us-east-1");
  o.instance_type = "p5.48xlarge";
  o.count = 2;
  return o;
}

AwsPreflightAnswers aws_answers() {
  return {"us-east-1a", data("aws-instance-type-offerings-p5.json"),
          data("aws-instance-types-p5.json"), data("aws-service-quota-p.json"), ""};
}

GcpClusterOptions gcp_options() {
  GcpClusterOptions o = dsx::test::ci_gcp_cluster();
  o.machine_type = "a3-highgpu-8g";
  o.count = 1;
  return o;
}

GcpPreflightAnswers gcp_answers() {
  return {data("gcp-machine-type-a3-highgpu-8g.json"), data("gcp-region-us-central1.json"), ""};
}

// The findings as "E: text" / "W: text" lines.
std::string lines(const std::vector<Finding>& findings) {
  std::string out;
  for (const auto& f : findings) out += (f.error ? "E: " : "W: ") + f.text + "\n";
  return out;
}

}  // namespace

TEST(CloudPreflight, AwsP5InAnOfferingZoneWithEnoughQuotaPasses) {
  EXPECT_EQ(lines(aws_preflight_findings(aws_options(), aws_answers())), "");
}

TEST(CloudPreflight, AwsTypeNotOfferedInTheSubnetZoneNamesTheZoneAndTheCall) {
  auto a = aws_answers();
  a.offerings_json = data("aws-instance-type-offerings-none.json");
  EXPECT_EQ(lines(aws_preflight_findings(aws_options(), a)),
            "E: p5.48xlarge is not offered in us-east-1a, the zone of subnet-0aaa: use a subnet in "
            "a zone that offers it (aws ec2 describe-instance-type-offerings --location-type "
            "availability-zone --filters Name=instance-type,Values=p5.48xlarge)\n");
}

TEST(CloudPreflight, AwsQuotaBelowCountTimesVcpusSaysHowMuchToAskFor) {
  auto o = aws_options();
  o.count = 3;  // 3 x 192 = 576 vCPUs > 384
  EXPECT_EQ(lines(aws_preflight_findings(o, aws_answers())),
            "E: 3 x p5.48xlarge need 576 vCPUs of 'Running On-Demand P instances' (L-417A185B) in "
            "us-east-1, but the quota is 384: request an increase to 576 (aws service-quotas "
            "request-service-quota-increase --service-code ec2 --quota-code L-417A185B "
            "--desired-value 576)\n");
}

TEST(CloudPreflight, AwsTypeWithoutEfaOrWithFewerCardsIsRefused) {
  auto a = aws_answers();
  std::string json = a.types_json;
  json.replace(json.find("\"EfaSupported\": true"), 20, "\"EfaSupported\": false");
  json.replace(json.find("\"MaximumNetworkCards\": 32"), 25, "\"MaximumNetworkCards\": 16");
  a.types_json = json;
  const std::string found = lines(aws_preflight_findings(aws_options(), a));
  EXPECT_NE(found.find("E: p5.48xlarge reports no EFA support"), std::string::npos) << found;
  EXPECT_NE(found.find("E: p5.48xlarge has 16 network cards, but the launch template puts an EFA "
                       "interface on 32"),
            std::string::npos)
      << found;
}

TEST(CloudPreflight, AwsCapacityBlockTooSmallOrInAnotherZone) {
  auto o = aws_options();
  o.capacity_reservation = "cr-0123456789abcdef0";
  o.capacity_block = true;
  auto a = aws_answers();
  a.reservation_json = data("aws-capacity-reservation.json");
  EXPECT_EQ(lines(aws_preflight_findings(o, a)),
            "E: capacity reservation cr-0123456789abcdef0 has 1 instances free, 2 asked for: lower "
            "--count or enlarge it\n");
  o.count = 1;
  a.subnet_az = "us-east-1b";
  a.offerings_json.replace(a.offerings_json.find("us-east-1a"), 10, "us-east-1b");
  EXPECT_EQ(lines(aws_preflight_findings(o, a)),
            "E: capacity reservation cr-0123456789abcdef0 is in us-east-1a but subnet-0aaa is in "
            "us-east-1b: use a subnet in us-east-1a\n");
  a = aws_answers();
  a.reservation_json = data("aws-capacity-reservation.json");
  a.reservation_json.replace(a.reservation_json.find("\"active\""), 8, "\"payment-pending\"");
  EXPECT_NE(lines(aws_preflight_findings(o, a)).find("is payment-pending, not active"),
            std::string::npos);
}

TEST(CloudPreflight, AwsFailedCallsSayWhatToCheck) {
  const std::string found = lines(aws_preflight_findings(aws_options(), {}));
  EXPECT_NE(found.find("E: subnet subnet-0aaa was not found in us-east-1"), std::string::npos)
      << found;
  EXPECT_NE(found.find("W: could not read the quota L-417A185B"), std::string::npos) << found;
}

TEST(CloudPreflight, GcpMachineInTheZoneWithEnoughQuotaPasses) {
  EXPECT_EQ(lines(gcp_preflight_findings(gcp_options(), gcp_answers())), "");
}

TEST(CloudPreflight, GcpQuotaCountsUsageAndSpotUsesThePreemptibleMetric) {
  auto o = gcp_options();
  o.count = 2;  // 16 H100s, 8 of 16 in use
  EXPECT_EQ(lines(gcp_preflight_findings(o, gcp_answers())),
            "E: 2 x a3-highgpu-8g need 16 NVIDIA_H100_GPUS in us-central1; the quota is 16 with 8 "
            "in use: request more (IAM & Admin > Quotas), use a reservation, or another region\n");
  o.spot = true;
  EXPECT_EQ(gcp_gpu_quota_metric(o), "PREEMPTIBLE_NVIDIA_H100_GPUS");
  EXPECT_EQ(lines(gcp_preflight_findings(o, gcp_answers())), "");
  o.spot = false;
  o.machine_type = "a3-megagpu-8g";  // no NVIDIA_H100_MEGA_GPUS in the listing: a warning
  const std::string found = lines(gcp_preflight_findings(o, gcp_answers()));
  EXPECT_NE(found.find("W: region us-central1 lists no quota NVIDIA_H100_MEGA_GPUS"),
            std::string::npos)
      << found;
}

TEST(CloudPreflight, GcpMachineNotInTheZoneSaysHowToFindOne) {
  auto a = gcp_answers();
  a.machine_json.clear();  // gcloud failed: the type does not exist there
  EXPECT_NE(lines(gcp_preflight_findings(gcp_options(), a))
                .find("E: a3-highgpu-8g is not offered in zone us-central1-a (or the call failed: "
                      "its message is above): pick a zone from gcloud compute machine-types list "
                      "--filter=name=a3-highgpu-8g"),
            std::string::npos);
}

TEST(CloudPreflight, GcpReservationMustBeReadyOfTheTypeAndLargeEnough) {
  auto o = gcp_options();
  o.zone = "us-central1-b";
  o.machine_type = "a3-ultragpu-8g";
  o.reservation = "my-a3u-reservation";
  o.count = 2;
  auto a = gcp_answers();
  a.machine_json.clear();
  a.machine_json = data("gcp-machine-type-a3-highgpu-8g.json");
  a.reservation_json = data("gcp-reservation.json");
  EXPECT_EQ(lines(gcp_preflight_findings(o, a)), "");  // 4 reserved, 2 in use: 2 free
  o.count = 3;
  EXPECT_EQ(lines(gcp_preflight_findings(o, a)),
            "E: reservation my-a3u-reservation has 2 VMs free, 3 asked for: lower --count or "
            "enlarge it\n");
  o.count = 1;
  a.reservation_json.replace(a.reservation_json.find("\"READY\""), 7, "\"CREATING\"");
  EXPECT_EQ(lines(gcp_preflight_findings(o, a)),
            "E: reservation my-a3u-reservation is CREATING, not READY: wait until it is allocated\n");
}

// The checks are steps of up, before its first create, and --dry-run prints them.
TEST(CloudPreflight, UpPlansStartWithTheReadOnlyChecks) {
  auto o = aws_options();
  o.capacity_reservation = "cr-0123456789abcdef0";
  const Plan aws = aws_up_plan(o);
  ASSERT_GE(aws.steps.size(), 5u);
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(aws.steps[i].what.rfind("pre-flight: ", 0), 0u) << aws.steps[i].what;
  }
  EXPECT_TRUE(bool(aws.steps[4].check));
  EXPECT_EQ(aws.steps[4].argv[4], "describe-capacity-reservations");
  std::ostringstream script;
  print_plan(script, aws);
  EXPECT_NE(script.str().find("get-service-quota --service-code ec2 --quota-code L-417A185B"),
            std::string::npos);
  EXPECT_NE(script.str().find("# dsx then checks: offered in the zone"), std::string::npos);
  const Plan gcp = gcp_up_plan(gcp_options());
  EXPECT_EQ(gcp.steps[0].argv[1], "compute");
  EXPECT_EQ(gcp.steps[0].argv[2], "machine-types");
  EXPECT_TRUE(bool(gcp.steps[1].check));
}
