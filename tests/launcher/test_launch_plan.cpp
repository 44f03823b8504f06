// The runner's decisions end to end (ref/launcher.md 3.1, cases E1-E31): hostfile, visible
// devices, filters, --num_nodes, --num_gpus, and which cases are errors. Where dsx deliberately
// differs from DeepSpeed (documented in docs/launch.md) the test says so.
#include <gtest/gtest.h>

#include <functional>

#include "dsx/error.h"
#include "launcher/launch_plan.h"

using namespace dsx::launcher;

namespace {

const char* HF2 = "worker-0 slots=4\nworker-1 slots=4\n";
const char* HF3 = "w0 slots=2\nw1 slots=4\nw2 slots=2\n";

struct Case {
  std::optional<std::vector<HostfileEntry>> hostfile;
  LaunchOptions options;
  LocalMachine machine{4, true, ""};
};

Case gpus(int n, const std::string& cvd = "") { return {std::nullopt, {}, {n, true, cvd}}; }
Case hostfile(const char* text) { return {parse_hostfile(text, "hf"), {}, {0, false, ""}}; }

LaunchPlan plan(Case c, const std::function<void(LaunchOptions&)>& set = {}) {
  if (set) set(c.options);
  return plan_launch(c.options, c.hostfile, c.machine);
}

std::string error_of(Case c, const std::function<void(LaunchOptions&)>& set) {
  try {
    plan(c, set);
  } catch (const dsx::Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(LaunchPlan, E1_NoHostfileUsesAllLocalDevices) {
  auto p = plan(gpus(4), [](LaunchOptions& o) { o.master_addr = ""; });
  EXPECT_EQ(p.world, (World{{"localhost", {0, 1, 2, 3}}}));
  EXPECT_FALSE(p.multi_node);
  EXPECT_FALSE(p.hostfile_mode);
  EXPECT_EQ(p.master_addr, "127.0.0.1");
}

TEST(LaunchPlan, E2_VisibleDevicesSelectLocalSlots) {
  auto p = plan(gpus(4, "1,3"));
  EXPECT_EQ(p.world, (World{{"localhost", {1, 3}}}));
  EXPECT_TRUE(p.drop_visible_devices);
}

TEST(LaunchPlan, E3_VisibleDevicesWithNumGpusTakesTheFirstK) {
  EXPECT_EQ(plan(gpus(4, "0,1"), [](LaunchOptions& o) { o.num_gpus = 1; }).world, (World{{"localhost", {0}}}));
  EXPECT_EQ(plan(gpus(4, "2,3"), [](LaunchOptions& o) { o.num_gpus = 1; }).world, (World{{"localhost", {2}}}));
}

TEST(LaunchPlan, E4_VisibleDevicesWithNumNodes1IsAcceptedByDsx) {
  // DeepSpeed raises "Cannot specify num_nodes/gpus with include/exclude" here (its quirk).
  EXPECT_EQ(plan(gpus(4, "0,1"), [](LaunchOptions& o) { o.num_nodes = 1; }).world, (World{{"localhost", {0, 1}}}));
}

TEST(LaunchPlan, E5_NumNodesWithoutHostfile) {
  EXPECT_NE(error_of(gpus(4), [](LaunchOptions& o) { o.num_nodes = 2; }).find("Num nodes is >1 but no extra nodes available via hostfile"),
            std::string::npos);
}

TEST(LaunchPlan, E6_NoDevices) {
  EXPECT_NE(error_of(gpus(0), {}).find("Unable to proceed, no GPU resources available"), std::string::npos);
}

TEST(LaunchPlan, E7_IncludeOfAMissingDeviceIsCaught) {
  EXPECT_NE(error_of(gpus(4), [](LaunchOptions& o) { o.include = "localhost:6"; }).find("No slot '6' specified on host 'localhost'"),
            std::string::npos);
}

TEST(LaunchPlan, E8_NumGpusIsNotCappedSoCpuHostsCanRunManyProcesses) {
  EXPECT_EQ(plan(gpus(4), [](LaunchOptions& o) { o.num_gpus = 8; }).world, (World{{"localhost", {0, 1, 2, 3, 4, 5, 6, 7}}}));
}

TEST(LaunchPlan, E9_TwoHostsIsMultiNode) {
  auto p = plan(hostfile(HF2));
  EXPECT_EQ(p.world, (World{{"worker-0", {0, 1, 2, 3}}, {"worker-1", {0, 1, 2, 3}}}));
  EXPECT_TRUE(p.multi_node);
  EXPECT_TRUE(p.hostfile_mode);
  EXPECT_EQ(p.master_addr, "");  // resolved later from worker-0
}

TEST(LaunchPlan, E10_NumNodes1RunsLocallyUnlessForceMulti) {
  auto p = plan(hostfile(HF2), [](LaunchOptions& o) { o.num_nodes = 1; });
  EXPECT_EQ(p.world, (World{{"worker-0", {0, 1, 2, 3}}}));
  EXPECT_FALSE(p.multi_node);
  EXPECT_TRUE(plan(hostfile(HF2), [](LaunchOptions& o) { o.num_nodes = 1; o.force_multi = true; }).multi_node);
}

TEST(LaunchPlan, E11_NumNodesAboveHostCount) {
  EXPECT_EQ(plan(hostfile(HF2), [](LaunchOptions& o) { o.num_nodes = 5; }).world.size(), 2u);
}

TEST(LaunchPlan, E12_E13_NumGpusOverridesSlots) {
  EXPECT_EQ(plan(hostfile(HF2), [](LaunchOptions& o) { o.num_gpus = 2; }).world,
            (World{{"worker-0", {0, 1}}, {"worker-1", {0, 1}}}));
  EXPECT_EQ(plan(hostfile(HF2), [](LaunchOptions& o) { o.num_gpus = 6; }).world[1].slots.size(), 6u);
}

TEST(LaunchPlan, E14_BareIncludeMeansAllSlots) {
  // DeepSpeed crashes here (#6671); dsx implements the documented intent.
  EXPECT_EQ(plan(hostfile(HF2), [](LaunchOptions& o) { o.include = "worker-1"; }).world, (World{{"worker-1", {0, 1, 2, 3}}}));
}

TEST(LaunchPlan, E15_IncludeSlots) {
  auto p = plan(hostfile(HF2), [](LaunchOptions& o) { o.include = "worker-1:1,3"; });
  EXPECT_EQ(p.world, (World{{"worker-1", {1, 3}}}));
  EXPECT_FALSE(p.multi_node);
}

TEST(LaunchPlan, E16_E17_SlotsMustExist) {
  EXPECT_NE(error_of(hostfile(HF2), [](LaunchOptions& o) { o.include = "worker-1:7"; }).find("No slot '7' specified on host 'worker-1'"),
            std::string::npos);
  EXPECT_NE(error_of(hostfile(HF2), [](LaunchOptions& o) { o.exclude = "worker-1:7"; }).find("No slot '7' specified on host 'worker-1'"),
            std::string::npos);
}

TEST(LaunchPlan, E18_ExcludeAHostLeavesOneLocalHost) {
  auto p = plan(hostfile(HF2), [](LaunchOptions& o) { o.exclude = "worker-0"; });
  EXPECT_EQ(p.world, (World{{"worker-1", {0, 1, 2, 3}}}));
  EXPECT_FALSE(p.multi_node);
}

TEST(LaunchPlan, E19_E20_Conflicts) {
  EXPECT_NE(error_of(hostfile(HF2), [](LaunchOptions& o) { o.include = "worker-0:0"; o.exclude = "worker-1"; })
                .find("mutually exclusive"),
            std::string::npos);
  EXPECT_NE(error_of(hostfile(HF2), [](LaunchOptions& o) { o.include = "worker-0:0"; o.num_gpus = 1; })
                .find("Cannot specify num_nodes/gpus with include/exclude"),
            std::string::npos);
  // DeepSpeed's `>= 0` test: even --num_gpus 0 conflicts.
  EXPECT_NE(error_of(hostfile(HF2), [](LaunchOptions& o) { o.exclude = "worker-0"; o.num_gpus = 0; })
                .find("Cannot specify num_nodes/gpus"),
            std::string::npos);
}

TEST(LaunchPlan, E21_VisibleDevicesIgnoredWithHostfile) {
  Case c = hostfile(HF2);
  c.machine.visible_devices = "0";
  auto p = plan(c);
  EXPECT_EQ(p.world[0].slots.size(), 4u);
  EXPECT_FALSE(p.drop_visible_devices);
}

TEST(LaunchPlan, E22_E23_ThreeHosts) {
  EXPECT_EQ(plan(hostfile(HF3), [](LaunchOptions& o) { o.exclude = "w1:0,1@w2"; }).world, (World{{"w0", {0, 1}}, {"w1", {2, 3}}}));
  EXPECT_EQ(plan(hostfile(HF3), [](LaunchOptions& o) { o.include = "w2:1@w0:1"; }).world, (World{{"w0", {1}}, {"w2", {1}}}));
}

TEST(LaunchPlan, E24_E25_ZeroSlotHosts) {
  const char* hf = "a slots=0\nb slots=2\n";
  EXPECT_EQ(plan(hostfile(hf)).world, (World{{"a", {}}, {"b", {0, 1}}}));
  EXPECT_EQ(plan(hostfile(hf), [](LaunchOptions& o) { o.exclude = "b:0"; }).world, (World{{"b", {1}}}));
}

TEST(LaunchPlan, HostfileWithOnlyZeroSlotsIsRefusedNamingTheLines) {
  // issue 33 item 19: this used to start nothing and exit 0.
  std::string err = error_of(hostfile("# none\na slots=0\nb slots=0\n"), [](LaunchOptions& o) { o.hostfile = "hf"; });
  EXPECT_NE(err.find("no ranks to start"), std::string::npos) << err;
  EXPECT_NE(err.find("hostfile hf:2: a slots=0"), std::string::npos) << err;
  EXPECT_NE(err.find("hostfile hf:3: b slots=0"), std::string::npos) << err;
  // --num_gpus replaces the slots (as in DeepSpeed), so there is something to start.
  EXPECT_EQ(plan(hostfile("a slots=0\n"), [](LaunchOptions& o) { o.num_gpus = 1; o.num_gpus_given = true; }).world,
            (World{{"a", {0}}}));
}

TEST(LaunchPlan, NumGpusZeroOrNegativeIsRefused) {
  // issue 33 item 19: --num_gpus 0 and -5 used to start one rank per slot.
  for (int n : {0, -1, -5}) {
    for (Case c : {gpus(4), hostfile(HF2)}) {
      std::string err = error_of(c, [n](LaunchOptions& o) { o.num_gpus = n; o.num_gpus_given = true; });
      EXPECT_NE(err.find("--num_gpus " + std::to_string(n) + ": give the number of ranks per node"), std::string::npos) << err;
    }
  }
}

TEST(LaunchPlan, E26_E27_E28_FilterSyntaxErrors) {
  for (const char* inc : {"worker-0:", "worker-0:a", "worker-0:0:1", "worker-0:0-3"}) {
    EXPECT_NE(error_of(hostfile(HF2), [&](LaunchOptions& o) { o.include = inc; }), "") << inc;
  }
  EXPECT_NE(error_of(hostfile(HF2), [](LaunchOptions& o) { o.include = "worker-0@"; }).find("Hostname '' not found"), std::string::npos);
  EXPECT_NE(error_of(hostfile(HF2), [](LaunchOptions& o) { o.include = " worker-0"; }).find("Hostname ' worker-0' not found"),
            std::string::npos);
}

TEST(LaunchPlan, E29_E30_RepeatedHosts) {
  EXPECT_EQ(plan(hostfile(HF2), [](LaunchOptions& o) { o.exclude = "worker-0:0@worker-0:0"; }).world,
            (World{{"worker-0", {1, 2, 3}}, {"worker-1", {0, 1, 2, 3}}}));
  EXPECT_EQ(plan(hostfile(HF2), [](LaunchOptions& o) { o.include = "worker-0:0@worker-0"; }).world, (World{{"worker-0", {0}}}));
}

TEST(LaunchPlan, E31_IncludeSlotsSorted) {
  EXPECT_EQ(plan(gpus(2), [](LaunchOptions& o) { o.include = "localhost:1,0"; }).world, (World{{"localhost", {0, 1}}}));
}

TEST(LaunchPlan, NoSshNeedsNodeRankInRangeAndMasterAddr) {
  EXPECT_NE(error_of(hostfile(HF2), [](LaunchOptions& o) { o.no_ssh = true; o.node_rank = 2; o.master_addr = "10.0.0.1"; })
                .find("--node_rank in [0, 2)"),
            std::string::npos);
  EXPECT_NE(error_of(hostfile(HF2), [](LaunchOptions& o) { o.no_ssh = true; o.node_rank = 1; }).find("--master_addr"), std::string::npos);
  auto p = plan(hostfile(HF2), [](LaunchOptions& o) { o.no_ssh = true; o.node_rank = 1; o.master_addr = "10.0.0.1"; });
  EXPECT_FALSE(p.multi_node);
  EXPECT_EQ(p.node_rank, 1);
}

TEST(LaunchPlan, ExplicitMasterAddrWinsOnOneNode) {
  EXPECT_EQ(plan(gpus(2), [](LaunchOptions& o) { o.master_addr = "10.1.2.3"; }).master_addr, "10.1.2.3");
}

TEST(LaunchPlan, ModuleWithNoPythonIsAnError) {
  EXPECT_NE(error_of(gpus(2), [](LaunchOptions& o) { o.module = true; o.no_python = true; }), "");
}

TEST(LaunchPlan, BadVisibleDevices) {
  EXPECT_NE(error_of(gpus(4, "0,x"), {}).find("'x' is not a device index"), std::string::npos);
  EXPECT_NE(error_of(gpus(4, "0,7"), {}).find("names device 7"), std::string::npos);
}
