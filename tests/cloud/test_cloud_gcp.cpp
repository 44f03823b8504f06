// The gcloud commands of `dsx cloud gcp up|down`, checked flag by flag against
// shared/ref/cloud.md 2.1-2.4 for each machine type.
#include <gtest/gtest.h>

#include <algorithm>

#include "cloud/gcp_plan.h"
#include "dsx/error.h"
#include "tests/cloud/ci_cluster.h"
#include "tests/expect_contains.h"

using namespace dsx::cloud;

namespace {

GcpClusterOptions options(const std::string& machine) {
  GcpClusterOptions o = dsx::test::ci_gcp_cluster();
  o.machine_type = machine;
  o.count = 4;
  o.out_dir = "out";
  return o;
}

bool has(const std::vector<std::string>& argv, const std::string& word) {
  return std::find(argv.begin(), argv.end(), word) != argv.end();
}

// The steps whose command starts with `words` after "gcloud".
std::vector<std::vector<std::string>> commands(const Plan& plan,
                                               const std::vector<std::string>& words) {
  std::vector<std::vector<std::string>> found;
  for (const auto& step : plan.steps) {
    if (step.argv.size() > words.size() &&
        std::equal(words.begin(), words.end(), step.argv.begin() + 1)) {
      found.push_back(step.argv);
    }
  }
  return found;
}

int count_prefix(const std::vector<std::string>& argv, const std::string& prefix) {
  return int(std::count_if(argv.begin(), argv.end(),
                           [&](const auto& w) { return w.rfind(prefix, 0) == 0; }));
}

}  // namespace

class CloudGcpMachine : public ::testing::TestWithParam<const char*> {};

TEST_P(CloudGcpMachine, InstanceTemplateFlags) {
  const auto o = options(GetParam());
  const auto& type = gcp_machine_type(o.machine_type);
  auto templates = commands(gcp_up_plan(o), {"compute", "instance-templates", "create"});
  ASSERT_EQ(templates.size(), 1u);
  const auto& t = templates[0];
  EXPECT_EQ(t[4], "dsx-ci");
  EXPECT_TRUE(has(t, "--machine-type=" + o.machine_type));
  EXPECT_TRUE(has(t, "--maintenance-policy=TERMINATE")) << "GPU VMs cannot live-migrate";
  EXPECT_TRUE(has(t, "--restart-on-failure"));
  EXPECT_EQ(count_prefix(t, "--accelerator"), 0) << "A2/A3 GPUs come with the machine type";
  EXPECT_EQ(count_prefix(t, "--network-interface="), 1 + type.gpu_nics);
  EXPECT_TRUE(has(t, "--network-interface=nic-type=GVNIC,network=default,subnet=default"));
  for (int nic = 1; nic <= type.gpu_nics; ++nic) {
    const std::string net = "dsx-ci-gpu-" + std::to_string(nic);
    EXPECT_TRUE(has(
        t, "--network-interface=nic-type=GVNIC,network=" + net + ",subnet=" + net + ",no-address"))
        << nic;
  }
  EXPECT_TRUE(has(t, "--region=us-central1")) << "the GPU subnets are regional";
  EXPECT_TRUE(has(t, "--image-project=deeplearning-platform-release"));
  EXPECT_EQ(count_prefix(t, "--image-family="), 1);
  EXPECT_TRUE(has(t, "--metadata=install-nvidia-driver=True,dsx-cluster=ci"));
  EXPECT_TRUE(has(t, "--metadata-from-file=startup-script=out/gcp/startup.sh"));
  EXPECT_TRUE(has(t, "--labels=dsx-cluster=ci"));
  EXPECT_TRUE(has(t, "--tags=dsx-ci"));
  EXPECT_TRUE(has(t, "--scopes=cloud-platform"));
  EXPECT_TRUE(has(t, "--resource-policies=dsx-ci"));
  EXPECT_TRUE(has(t, "--boot-disk-type=" + std::string(type.boot_disk_type)));
  EXPECT_TRUE(has(t, "--service-account=${PROJECT_NUMBER}-compute@developer.gserviceaccount.com"));
}

TEST_P(CloudGcpMachine, OneVpcSubnetAndRulePerGpuNic) {
  const auto o = options(GetParam());
  const int nics = gcp_machine_type(o.machine_type).gpu_nics;
  auto plan = gcp_up_plan(o);
  auto networks = commands(plan, {"compute", "networks", "create"});
  auto subnets = commands(plan, {"compute", "networks", "subnets", "create"});
  ASSERT_EQ(int(networks.size()), nics);
  ASSERT_EQ(int(subnets.size()), nics);
  for (int i = 0; i < nics; ++i) {
    const std::string net = "dsx-ci-gpu-" + std::to_string(i + 1);
    EXPECT_EQ(networks[i][4], net);
    EXPECT_TRUE(has(networks[i], "--subnet-mode=custom"));
    EXPECT_TRUE(has(networks[i], "--mtu=8244"));
    EXPECT_EQ(subnets[i][5], net);
    EXPECT_TRUE(has(subnets[i], "--network=" + net));
    EXPECT_TRUE(has(subnets[i], "--region=us-central1"));
    EXPECT_TRUE(has(subnets[i], "--range=192.168." + std::to_string(i + 1) + ".0/24"));
  }
  auto rules = commands(plan, {"compute", "firewall-rules", "create"});
  ASSERT_EQ(int(rules.size()), nics + 2);
  for (int i = 0; i < nics; ++i) {
    EXPECT_TRUE(has(rules[i], "--rules=tcp:0-65535,udp:0-65535,icmp"));
    EXPECT_TRUE(has(rules[i], "--source-ranges=192.168.0.0/16"));
    EXPECT_TRUE(has(rules[i], "--action=ALLOW"));
  }
  const auto& internal = rules[nics];
  EXPECT_EQ(internal[4], "dsx-ci-internal");
  EXPECT_TRUE(has(internal, "--network=default"));
  EXPECT_TRUE(has(internal, "--rules=all"));
  EXPECT_TRUE(has(internal, "--source-tags=dsx-ci"));
  EXPECT_TRUE(has(internal, "--target-tags=dsx-ci"));
  const auto& ssh = rules[nics + 1];
  EXPECT_EQ(ssh[4], "dsx-ci-ssh");
  EXPECT_TRUE(has(ssh, "--rules=tcp:22"));
  EXPECT_TRUE(has(ssh, "--source-ranges=35.235.240.0/20"));
  EXPECT_EQ(count_prefix(ssh, "--source-tags"), 0) << "SSH only from the CIDR";
}

TEST_P(CloudGcpMachine, CompactPlacementAndOneBulkCreate) {
  const auto o = options(GetParam());
  auto plan = gcp_up_plan(o);
  auto placement = commands(plan, {"compute", "resource-policies", "create", "group-placement"});
  ASSERT_EQ(placement.size(), 1u);
  EXPECT_EQ(placement[0][5], "dsx-ci");
  EXPECT_TRUE(has(placement[0], "--collocation=collocated"));
  EXPECT_TRUE(has(placement[0], "--vm-count=4"));
  EXPECT_TRUE(has(placement[0], "--region=us-central1"));
  auto bulk = commands(plan, {"compute", "instances", "bulk", "create"});
  ASSERT_EQ(bulk.size(), 1u);
  EXPECT_TRUE(has(bulk[0], "--count=4"));
  EXPECT_TRUE(has(bulk[0], "--zone=us-central1-a"));
  EXPECT_TRUE(has(bulk[0], "--source-instance-template=dsx-ci"));
  EXPECT_TRUE(has(bulk[0], "--name-pattern=dsx-ci-####"));
  // The bulk create comes last, after everything it refers to exists.
  EXPECT_EQ(plan.steps.back().argv, bulk[0]);
  for (const auto& step : plan.steps) {
    EXPECT_EQ(step.argv[0], "gcloud");
    // The image family is looked up in the image's own project.
    const bool family = has(step.argv, "describe-from-family");
    EXPECT_TRUE(
        has(step.argv, family ? "--project=deeplearning-platform-release" : "--project=proj-1"))
        << step.what;
    EXPECT_TRUE(has(step.argv, "--quiet")) << step.what << ": a prompt would hang up";
  }
}

TEST_P(CloudGcpMachine, DownDeletesInDependencyOrder) {
  const auto o = options(GetParam());
  const int nics = gcp_machine_type(o.machine_type).gpu_nics;
  auto plan = gcp_down_plan(o);
  ASSERT_GE(plan.steps.size(), 2u);
  EXPECT_TRUE(has(plan.steps[0].argv, "--filter=labels.dsx-cluster=ci"));
  EXPECT_EQ(plan.steps[1].argv[3], "delete");
  EXPECT_EQ(plan.steps[1].skip_if_empty, "NAMES");
  auto position = [&](const std::vector<std::string>& words) {
    for (size_t i = 0; i < plan.steps.size(); ++i) {
      const auto& a = plan.steps[i].argv;
      if (std::search(a.begin(), a.end(), words.begin(), words.end()) != a.end()) return int(i);
    }
    return -1;
  };
  EXPECT_LT(position({"instances", "delete"}), position({"instance-templates", "delete"}));
  for (int nic = 1; nic <= nics; ++nic) {
    const std::string net = "dsx-ci-gpu-" + std::to_string(nic);
    int rule = position({"firewall-rules", "delete", net + "-internal"});
    int subnet = position({"subnets", "delete", net});
    int network = position({"networks", "delete", net});
    EXPECT_GE(rule, 0);
    EXPECT_LT(rule, network);
    EXPECT_LT(subnet, network);
  }
  for (size_t i = 2; i < plan.steps.size(); ++i)
    EXPECT_TRUE(plan.steps[i].may_fail) << plan.steps[i].what;
}

INSTANTIATE_TEST_SUITE_P(AllTypes, CloudGcpMachine,
                         ::testing::Values("a2-highgpu-8g", "a2-megagpu-16g", "a2-ultragpu-8g",
                                           "a3-highgpu-8g", "a3-megagpu-8g"));

TEST(CloudGcpOptions, BadValuesNameTheFlag) {
  auto o = options("a3-highgpu-8g");
  o.zone = "us-central1";
  EXPECT_THROW(validate(o), dsx::Error);
  o = options("a3-highgpu-8g");
  o.ssh_cidr = "0.0.0.0";
  try {
    validate(o);
    FAIL();
  } catch (const dsx::Error& e) {
    EXPECT_NE(std::string(e.what()).find("--ssh-cidr"), std::string::npos);
  }
  o = options("a3-highgpu-8g");
  o.cluster = "Bad_Name";
  EXPECT_THROW(validate(o), dsx::Error);
  EXPECT_EQ(gcp_region(options("a3-highgpu-8g")), "us-central1");
}

namespace {

GcpClusterOptions ultra(const std::string& reservation = "res-a3u", bool spot = false) {
  auto o = options("a3-ultragpu-8g");
  o.zone = "us-central1-b";
  o.reservation = reservation;
  o.spot = spot;
  return o;
}

std::vector<std::string> instance_template(const GcpClusterOptions& o) {
  auto templates = commands(gcp_up_plan(o), {"compute", "instance-templates", "create"});
  return templates.size() == 1 ? templates[0] : std::vector<std::string>{};
}

std::string usage_error(const GcpClusterOptions& o) {
  try {
    validate(o);
  } catch (const dsx::Error& e) {
    EXPECT_EQ(e.kind(), dsx::ErrorKind::Usage);
    return e.what();
  }
  return "";
}

}  // namespace

// A3 Ultra: one VPC with the zone's RoCE network profile and one subnet per MRDMA NIC; RDMA VPCs
// take no firewall rule, so only the primary VPC's two rules are made.
TEST(CloudGcpRdma, OneRoceVpcWithASubnetPerMrdmaNicAndNoFirewallRule) {
  auto plan = gcp_up_plan(ultra());
  auto networks = commands(plan, {"compute", "networks", "create"});
  ASSERT_EQ(networks.size(), 1u);
  EXPECT_EQ(networks[0][4], "dsx-ci-rdma");
  EXPECT_TRUE(has(networks[0], "--network-profile=us-central1-b-vpc-roce"));
  EXPECT_TRUE(has(networks[0], "--subnet-mode=custom"));
  EXPECT_TRUE(has(networks[0], "--mtu=8896"));
  auto subnets = commands(plan, {"compute", "networks", "subnets", "create"});
  ASSERT_EQ(subnets.size(), 8u);
  for (int i = 0; i < 8; ++i) {
    const std::string n = std::to_string(i + 1);
    EXPECT_EQ(subnets[i][5], "dsx-ci-rdma-" + n);
    EXPECT_TRUE(has(subnets[i], "--network=dsx-ci-rdma"));
    EXPECT_TRUE(has(subnets[i], "--region=us-central1"));
    EXPECT_TRUE(has(subnets[i], "--range=192.168." + n + ".0/24"));
  }
  auto rules = commands(plan, {"compute", "firewall-rules", "create"});
  ASSERT_EQ(rules.size(), 2u);
  for (const auto& rule : rules) EXPECT_TRUE(has(rule, "--network=default")) << rule[4];
  EXPECT_EQ(commands(plan, {"compute", "resource-policies", "create", "group-placement"}).size(),
            1u);
  EXPECT_EQ(plan.steps.back().argv, commands(plan, {"compute", "instances", "bulk", "create"})[0]);
}

TEST(CloudGcpRdma, TemplateHasEightMrdmaNicsAndIsBoundToTheReservation) {
  auto t = instance_template(ultra());
  ASSERT_FALSE(t.empty());
  EXPECT_EQ(count_prefix(t, "--network-interface="), 9);
  EXPECT_EQ(count_prefix(t, "--network-interface=nic-type=GVNIC"), 1) << "gVNIC for the host only";
  EXPECT_TRUE(has(t, "--network-interface=nic-type=GVNIC,network=default,subnet=default"));
  for (int nic = 1; nic <= 8; ++nic) {
    EXPECT_TRUE(
        has(t, "--network-interface=nic-type=MRDMA,network=dsx-ci-rdma,subnet=dsx-ci-rdma-" +
                   std::to_string(nic) + ",no-address"))
        << nic;
  }
  EXPECT_TRUE(has(t, "--boot-disk-type=hyperdisk-balanced"));
  EXPECT_TRUE(has(t, "--maintenance-policy=TERMINATE"));
  EXPECT_TRUE(has(t, "--reservation-affinity=specific"));
  EXPECT_TRUE(has(t, "--reservation=res-a3u"));
  EXPECT_TRUE(has(t, "--provisioning-model=RESERVATION_BOUND"));
  EXPECT_TRUE(has(t, "--instance-termination-action=DELETE"));
  EXPECT_TRUE(has(t, "--resource-policies=dsx-ci"));
}

TEST(CloudGcpRdma, SpotVmsAreDeletedWhenReclaimedAndNotRestarted) {
  auto t = instance_template(ultra("", /*spot=*/true));
  ASSERT_FALSE(t.empty());
  EXPECT_TRUE(has(t, "--provisioning-model=SPOT"));
  EXPECT_TRUE(has(t, "--instance-termination-action=DELETE"));
  EXPECT_TRUE(has(t, "--maintenance-policy=TERMINATE"));
  EXPECT_FALSE(has(t, "--restart-on-failure")) << "spot VMs cannot restart on failure";
  EXPECT_EQ(count_prefix(t, "--reservation"), 0);
}

// On machines GCP sells on demand, a reservation only says where the VMs come from.
TEST(CloudGcpOptions, AReservationOnAnOnDemandTypeSetsOnlyTheAffinity) {
  auto o = options("a3-megagpu-8g");
  o.reservation = "projects/shared-proj/reservations/mega-1";
  EXPECT_EQ(usage_error(o), "");
  auto t = instance_template(o);
  EXPECT_TRUE(has(t, "--reservation-affinity=specific"));
  EXPECT_TRUE(has(t, "--reservation=projects/shared-proj/reservations/mega-1"));
  EXPECT_TRUE(has(t, "--restart-on-failure"));
  EXPECT_EQ(count_prefix(t, "--provisioning-model"), 0);
  EXPECT_EQ(count_prefix(t, "--instance-termination-action"), 0);
  o.reservation.clear();
  o.spot = true;
  t = instance_template(o);
  EXPECT_TRUE(has(t, "--provisioning-model=SPOT"));
  EXPECT_FALSE(has(t, "--restart-on-failure"));
}

TEST(CloudGcpOptions, A3UltraNeedsAReservationOrSpot) {
  std::string message = usage_error(ultra(""));
  EXPECT_CONTAINS(message, "a3-ultragpu-8g");
  EXPECT_CONTAINS(message, "--reservation NAME");
  EXPECT_CONTAINS(message, "--spot");
  EXPECT_EQ(usage_error(ultra("res-a3u")), "");
  EXPECT_EQ(usage_error(ultra("", /*spot=*/true)), "");
  message = usage_error(ultra("res-a3u", /*spot=*/true));
  EXPECT_CONTAINS(message, "--spot and --reservation");
  message = usage_error(ultra("res a3u,x"));
  EXPECT_CONTAINS(message, "--reservation must name");
}

TEST(CloudGcpRdma, DownDeletesTheSubnetsThenTheRoceVpc) {
  auto plan = gcp_down_plan(ultra());
  auto position = [&](const std::vector<std::string>& words) {
    for (size_t i = 0; i < plan.steps.size(); ++i) {
      const auto& a = plan.steps[i].argv;
      if (std::search(a.begin(), a.end(), words.begin(), words.end()) != a.end()) return int(i);
    }
    return -1;
  };
  const int network = position({"networks", "delete", "dsx-ci-rdma"});
  ASSERT_GE(network, 0);
  EXPECT_TRUE(plan.steps[network].may_fail);
  EXPECT_LT(position({"instances", "delete"}), network);
  for (int nic = 1; nic <= 8; ++nic) {
    const std::string subnet = "dsx-ci-rdma-" + std::to_string(nic);
    int at = position({"subnets", "delete", subnet, "--region=us-central1"});
    ASSERT_GE(at, 0) << subnet;
    EXPECT_LT(at, network);
    EXPECT_TRUE(plan.steps[at].may_fail);
  }
  EXPECT_EQ(commands(plan, {"compute", "firewall-rules", "delete"}).size(), 1u)
      << "only the primary VPC's rules: the RoCE VPC has none";
  EXPECT_EQ(position({"dsx-ci-gpu-1"}), -1);
}
