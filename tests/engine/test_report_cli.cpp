// `dsx report` on this machine (no GPU, no driver) and with each environment-variable check
// triggered by a faked environment: the binary runs under `env -i` with only the variables given.
#include <gtest/gtest.h>
#include <rapidjson/document.h>

#include <algorithm>
#include <string>

#include "tests/tools/run_command.h"

using dsx::test::run_command;

namespace {

struct Report {
  int exit_code = -1;
  std::string output;
  rapidjson::Document json;
  bool has(const std::string& id) const {
    for (const auto& f : json["findings"].GetArray()) {
      if (id == f["id"].GetString()) return true;
    }
    return false;
  }
};

Report report(const std::string& env, const std::string& args = "--json") {
  Report r;
  auto result = run_command("env -i " + env + " " + std::string(DSX_EXE) + " report " + args);
  r.exit_code = result.exit_code;
  r.output = result.output;
  if (args.find("--json") != std::string::npos) {
    r.json.Parse(r.output.c_str());
    EXPECT_FALSE(r.json.HasParseError()) << r.output;
  }
  return r;
}

}  // namespace

TEST(ReportCli, ThisMachineWithoutGpuSaysSoCleanly) {
  auto r = report("");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(r.json["dsx"]["version"].IsString());
  EXPECT_GT(r.json["cpu"]["online_cores"].GetInt(), 0);
  EXPECT_STREQ(report("DSX_SIMD=scalar").json["cpu"]["kernel_simd"].GetString(), "scalar");
  EXPECT_TRUE(r.json["libfabric"]["version"].IsString());
  // Every provider is probed; on any Linux host at least shm (or tcp, sockets) can open an
  // endpoint: the ones comm's tests run on.
  bool host_provider = false;
  for (const auto& p : r.json["libfabric"]["providers"].GetArray()) {
    const std::string name = p["name"].GetString();
    host_provider |= p["usable"].GetBool() && (name == "shm" || name == "tcp" || name == "sockets");
  }
  EXPECT_EQ(r.json["libfabric"]["providers"].Size(), 6u);
  EXPECT_TRUE(host_provider);
  if (r.json["gpus"]["devices"].Empty()) {
    EXPECT_TRUE(r.has("no-gpu"));
    EXPECT_FALSE(std::string(r.json["gpus"]["unavailable_reason"].GetString()).empty());
  }
  for (const auto& f : r.json["findings"].GetArray()) {
    EXPECT_STRNE(f["severity"].GetString(), "error") << f["message"].GetString();
  }
}

TEST(ReportCli, TextReportHasEverySection) {
  auto r = report("", "");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* section : {"dsx\n", "CPU\n", "CUDA\n", "libfabric\n", "GPUs\n", "network\n",
                              "environment\n", "checks\n"}) {
    EXPECT_NE(r.output.find(section), std::string::npos) << section;
  }
  EXPECT_NE(r.output.find("error(s)"), std::string::npos);
}

TEST(ReportCli, SocketIfnameNamingNoInterface) {
  EXPECT_TRUE(report("NCCL_SOCKET_IFNAME=nosuch0").has("socket-ifname"));
  EXPECT_FALSE(report("NCCL_SOCKET_IFNAME=lo").has("socket-ifname"));
  EXPECT_TRUE(report("NCCL_SOCKET_IFNAME=lo WORLD_SIZE=4 LOCAL_WORLD_SIZE=2")
                  .has("socket-ifname-loopback"));
  EXPECT_TRUE(report("FI_TCP_IFACE=nosuch0").has("socket-ifname"));
  EXPECT_TRUE(report("NCCL_IB_HCA=nosuch_0:1").has("ib-hca"));
}

// --check is a node's readiness check: errors one line each and exit 1, else exit 0.
TEST(ReportCli, CheckPrintsEachErrorOnALineAndFails) {
  auto bad = report("NCCL_SOCKET_IFNAME=nosuch0", "--check");
  EXPECT_EQ(bad.exit_code, 1) << bad.output;
  EXPECT_NE(bad.output.find("dsx report: socket-ifname: NCCL_SOCKET_IFNAME=nosuch0 matches no network interface"),
            std::string::npos)
      << bad.output;
  EXPECT_EQ(std::count(bad.output.begin(), bad.output.end(), '\n'), 1) << bad.output;
  auto good = report("NCCL_SOCKET_IFNAME=lo", "--check");
  EXPECT_EQ(good.exit_code, 0) << good.output;
  EXPECT_EQ(good.output, "dsx report: no errors\n");
}

TEST(ReportCli, MultiNodeChecksUseJobVariablesOrFlag) {
  auto r = report("WORLD_SIZE=16 LOCAL_WORLD_SIZE=8 NCCL_IB_DISABLE=1");
  EXPECT_EQ(r.json["nodes"].GetInt(), 2);
  EXPECT_TRUE(r.has("ib-disabled-multi-node"));
  EXPECT_EQ(r.has("multi-node-no-rdma"), r.json["rdma_devices"].Empty());
  EXPECT_FALSE(report("NCCL_IB_DISABLE=1").has("ib-disabled-multi-node"));
  EXPECT_TRUE(report("NCCL_IB_DISABLE=1", "--json --nodes 4").has("ib-disabled-multi-node"));
  EXPECT_TRUE(report("SLURM_JOB_NUM_NODES=3 NCCL_IB_DISABLE=1").has("ib-disabled-multi-node"));
}

TEST(ReportCli, VariablesAreExplainedAndMistakesFlagged) {
  auto r = report(
      "NCCL_DEBUG=INFO NCCL_TIMEOUT=1800 NCCL_SOCKET_IFACE=eth0 NCCL_PROTO=LL128 "
      "NCCL_P2P_DISABLE=1");
  bool explained = false;
  for (const auto& v : r.json["variables"].GetArray()) {
    if (std::string("NCCL_DEBUG") == v["name"].GetString()) {
      explained = std::string(v["meaning"].GetString()).find("log level") != std::string::npos;
    }
  }
  EXPECT_TRUE(explained);
  EXPECT_TRUE(r.has("nccl-timeout"));
  EXPECT_TRUE(r.has("unknown-nccl-variable"));
  EXPECT_TRUE(r.has("proto-forced"));
  EXPECT_TRUE(r.has("p2p-disabled"));
  EXPECT_NE(r.output.find("did you mean NCCL_SOCKET_IFNAME?"), std::string::npos);
}

TEST(ReportCli, FabricVariablesChecked) {
  if (report("").json["rdma_devices"].Empty()) {
    EXPECT_TRUE(report("FI_EFA_USE_DEVICE_RDMA=1").has("efa-rdma-without-efa"));
  }
  EXPECT_TRUE(report("FI_PROVIDER=nosuchprovider").has("fi-provider-unusable"));
  bool tcp_usable = false;
  for (const auto& p : report("").json["libfabric"]["providers"].GetArray()) {
    tcp_usable |= std::string("tcp") == p["name"].GetString() && p["usable"].GetBool();
  }
  EXPECT_EQ(report("FI_PROVIDER=tcp").has("fi-provider-unusable"), !tcp_usable);
  EXPECT_TRUE(report("DSX_OFI_PROVIDER=verbs").has("fi-provider-unusable") ||
              report("").json["rdma_devices"].Size() > 0);
}

TEST(ReportCli, BadFlagIsAUsageError) {
  auto r = report("", "--nodes -1");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("--nodes must not be negative"), std::string::npos) << r.output;
}

// The GPU section through a stand-in NVML (tests/engine/fake_nvml.cpp): this machine has no
// driver, so the topology logic is exercised on made-up machines.
TEST(ReportCli, NvSwitchNodeShowsNvLinksEverywhere) {
  auto r =
      report(std::string("LD_LIBRARY_PATH=") + FAKE_NVML_DIR + " FAKE_NVML_TOPOLOGY=nvswitch8");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto& gpus = r.json["gpus"]["devices"];
  ASSERT_EQ(gpus.Size(), 8u);
  EXPECT_STREQ(gpus[0]["name"].GetString(), "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(gpus[0]["memory_bytes"].GetInt64(), int64_t{81559} << 20);
  EXPECT_STREQ(gpus[3]["bus_id"].GetString(), "0000:13:00.0");
  EXPECT_STREQ(gpus[0]["links"][0].GetString(), "X");
  EXPECT_STREQ(gpus[0]["links"][7].GetString(), "NV18");
  EXPECT_FALSE(r.has("no-nvlink"));
  EXPECT_FALSE(r.has("no-gpu"));
}

TEST(ReportCli, PcieMachineShowsBridgeSwitchAndSocketAndWarns) {
  auto r = report(std::string("LD_LIBRARY_PATH=") + FAKE_NVML_DIR + " FAKE_NVML_TOPOLOGY=pcie4");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto& gpus = r.json["gpus"]["devices"];
  ASSERT_EQ(gpus.Size(), 4u);
  EXPECT_STREQ(gpus[0]["links"][1].GetString(), "NV4");
  EXPECT_STREQ(gpus[1]["links"][0].GetString(), "NV4");
  EXPECT_STREQ(gpus[2]["links"][3].GetString(), "PIX");
  EXPECT_STREQ(gpus[0]["links"][2].GetString(), "SYS");
  EXPECT_TRUE(r.has("no-nvlink"));
  auto text =
      report(std::string("LD_LIBRARY_PATH=") + FAKE_NVML_DIR + " FAKE_NVML_TOPOLOGY=pcie4", "");
  EXPECT_NE(text.output.find("GPU0-GPU2 SYS"), std::string::npos) << text.output;
  EXPECT_NE(text.output.find("NVIDIA A100-PCIE-40GB, 40.0 GiB"), std::string::npos) << text.output;
}
