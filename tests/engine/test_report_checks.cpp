// dsx report's checks on made-up machines: each check fires on the setup it is about and stays
// quiet on a healthy one.
#include <gtest/gtest.h>

#include <algorithm>

#include "tools/report/checks.h"
#include "tools/report/cuda_libraries.h"
#include "tools/report/variable_catalog.h"

namespace rep = dsx::report;

namespace {

// A healthy 8-GPU node behind NVSwitch with EFA, matching CUDA 12.4 libraries.
rep::Environment healthy_node() {
  rep::Environment env;
  env.build.libfabric_header = "1.17";
  env.fabric = {
      true, "1.22", 1, 22, {{"efa", true, "efa", "rdmap16s27-rdm"}, {"tcp", true, "tcp", "eth0"}}};
  env.cuda.runtime = {"CUDA runtime", true,  "/usr/local/cuda/lib64/libcudart.so.12",
                      "12.4",         12040, ""};
  env.cuda.driver = {"CUDA driver", true, "/usr/lib/libcuda.so.1", "12.4", 12040, ""};
  env.cuda.cublas = {"cuBLAS", true, "libcublas.so.12", "12.4.5", 120405, ""};
  env.cuda.cudnn = {"cuDNN", true, "libcudnn.so.9", "9.1.0", 90100, ""};
  env.cuda.cudnn_cudart_code = 12020;
  env.interfaces = {"lo", "enp71s0", "docker0"};
  env.rdma_devices = {"rdmap16s27", "rdmap32s27"};
  for (int i = 0; i < 8; ++i)
    env.gpus.gpus.push_back({i, "NVIDIA H100 80GB HBM3", int64_t{85} << 30, "", i / 4});
  env.gpus.links.assign(8, std::vector<rep::GpuLink>(8, rep::GpuLink::NvLink));
  env.gpus.nvlink_counts.assign(8, std::vector<int>(8, 18));
  for (int i = 0; i < 8; ++i) env.gpus.links[i][i] = rep::GpuLink::Self;
  env.job = {2, "--nodes"};
  return env;
}

std::vector<std::string> ids(const rep::Environment& env) {
  std::vector<std::string> out;
  for (const auto& f : rep::run_checks(env)) out.push_back(f.id);
  return out;
}

bool fires(const rep::Environment& env, const std::string& id) {
  auto all = ids(env);
  return std::find(all.begin(), all.end(), id) != all.end();
}

}  // namespace

TEST(ReportChecks, HealthyNodeHasNoFindings) {
  EXPECT_TRUE(ids(healthy_node()).empty()) << ::testing::PrintToString(ids(healthy_node()));
}

TEST(ReportChecks, GpusOffNvLinkAreNamed) {
  auto env = healthy_node();
  env.gpus.links[0][1] = env.gpus.links[1][0] = rep::GpuLink::Sys;
  auto findings = rep::run_checks(env);
  ASSERT_EQ(findings.size(), 1u);
  EXPECT_EQ(findings[0].id, "no-nvlink");
  EXPECT_NE(findings[0].message.find("GPU0-GPU1 SYS"), std::string::npos) << findings[0].message;
}

TEST(ReportChecks, NoGpuIsAnInfoNotAnError) {
  auto env = healthy_node();
  env.gpus = {};
  env.gpus.unavailable_reason = "NVML not found";
  auto findings = rep::run_checks(env);
  ASSERT_EQ(findings.size(), 1u);
  EXPECT_EQ(findings[0].severity, rep::Severity::Info);
  EXPECT_EQ(findings[0].id, "no-gpu");
}

TEST(ReportChecks, MismatchedVersions) {
  auto env = healthy_node();
  env.cuda.runtime.version_code = 12090;  // a newer 12.x runtime: minor-version compatible
  env.cuda.runtime.version = "12.9";
  EXPECT_FALSE(fires(env, "driver-too-old"));
  EXPECT_TRUE(fires(env, "driver-older-minor"));
  env.cuda.runtime.version_code = 13000;  // a CUDA 13 build on a CUDA 12 driver cannot run
  env.cuda.runtime.version = "13.0";
  env.gpus.driver_version = "550.90.07";
  bool named = false;
  for (const auto& f : rep::run_checks(env)) {
    if (f.id != "driver-too-old") continue;
    named = true;
    EXPECT_EQ(f.severity, rep::Severity::Error);
    EXPECT_NE(f.message.find(">= 580"), std::string::npos) << f.message;
    EXPECT_NE(f.message.find("driver 550.90.07"), std::string::npos) << f.message;
    EXPECT_NE(f.advice.find("dsx build for CUDA 12"), std::string::npos) << f.advice;
  }
  EXPECT_TRUE(named);
  env = healthy_node();
  env.cuda.cudnn_cudart_code = 11080;
  EXPECT_TRUE(fires(env, "cudnn-cuda-mismatch"));
  env = healthy_node();
  env.cuda.cublas.version_code = 110000;
  EXPECT_TRUE(fires(env, "cublas-cuda-mismatch"));
  env = healthy_node();
  env.build.libfabric_header = "1.22";
  env.fabric.major = 1;
  env.fabric.minor = 17;
  env.fabric.version = "1.17";
  EXPECT_TRUE(fires(env, "libfabric-older-than-build"));
  EXPECT_TRUE(fires(env, "libfabric-efa-old"));  // EFA present, libfabric < 1.18
}

TEST(ReportChecks, CudaBuildAgainstWhatLoads) {
  auto env = healthy_node();
  env.build.cudart_code = 12040;
  env.build.nccl_code = 22003;
  env.build.cudnn_code = 90100;
  env.cuda.nccl = {"NCCL", true, "libnccl.so.2", "2.21.5", 22105, ""};
  EXPECT_TRUE(ids(env).empty());
  env.build.cudart_code = 13000;
  EXPECT_TRUE(fires(env, "cuda-differs-from-build"));
  env = healthy_node();
  env.build.nccl_code = 22809;
  env.cuda.nccl = {"NCCL", true, "libnccl.so.2", "2.21.5", 22105, ""};
  EXPECT_TRUE(fires(env, "nccl-older-than-build"));
  env = healthy_node();
  env.build.cudnn_code = 8907;
  EXPECT_TRUE(fires(env, "cudnn-differs-from-build"));
}

TEST(ReportChecks, MultiNodeWithoutRdma) {
  auto env = healthy_node();
  env.rdma_devices.clear();
  env.fabric.providers = {{"efa", false, "", "No data available (-61)"},
                          {"tcp", true, "tcp;ofi_rxm", "eth0"}};
  EXPECT_TRUE(fires(env, "multi-node-no-rdma"));
  env.job.nodes = 1;
  EXPECT_FALSE(fires(env, "multi-node-no-rdma"));
}

TEST(ReportChecks, SocketIfnameFollowsNcclListRules) {
  const std::vector<std::string> ifaces = {"lo", "eth0", "eth1", "docker0"};
  EXPECT_EQ(rep::select_interfaces("eth", ifaces), (std::vector<std::string>{"eth0", "eth1"}));
  EXPECT_EQ(rep::select_interfaces("=eth", ifaces), std::vector<std::string>{});
  EXPECT_EQ(rep::select_interfaces("=eth1", ifaces), std::vector<std::string>{"eth1"});
  EXPECT_EQ(rep::select_interfaces("^docker,lo", ifaces),
            (std::vector<std::string>{"eth0", "eth1"}));
  EXPECT_EQ(rep::select_interfaces("^=eth0", ifaces),
            (std::vector<std::string>{"lo", "eth1", "docker0"}));

  auto env = healthy_node();
  env.variables = {{"NCCL_SOCKET_IFNAME", "enp"}};
  EXPECT_FALSE(fires(env, "socket-ifname"));
  env.variables = {{"NCCL_SOCKET_IFNAME", "ens5"}};
  EXPECT_TRUE(fires(env, "socket-ifname"));
  env.variables = {{"NCCL_SOCKET_IFNAME", "lo"}};
  EXPECT_TRUE(fires(env, "socket-ifname-loopback"));  // two nodes cannot meet on 127.0.0.1
}

TEST(ReportChecks, IbHcaMustNameAnRdmaDevice) {
  auto env = healthy_node();
  env.rdma_devices = {"mlx5_0", "mlx5_1"};
  env.variables = {{"NCCL_IB_HCA", "mlx5_0:1,mlx5_1:1"}};
  EXPECT_FALSE(fires(env, "ib-hca"));
  env.variables = {{"NCCL_IB_HCA", "=mlx5_4"}};
  EXPECT_TRUE(fires(env, "ib-hca"));
  env.rdma_devices.clear();
  env.variables = {{"NCCL_IB_HCA", "mlx5"}};
  EXPECT_TRUE(fires(env, "ib-hca"));
}

TEST(ReportChecks, VariableAdvice) {
  struct Case {
    const char* name;
    const char* value;
    const char* check;
    bool fires;
  };
  const Case cases[] = {
      {"RDMAV_FORK_SAFE", "1", "rdmav-on-efa", true},
      {"NCCL_P2P_DISABLE", "1", "p2p-disabled", true},
      {"FI_PROVIDER", "efa", "fi-provider-unusable", false},
      {"FI_PROVIDER", "verbs", "fi-provider-unusable", true},
      {"CUDA_VISIBLE_DEVICES", "0,8", "cuda-visible-devices", true},
      {"CUDA_VISIBLE_DEVICES", "", "cuda-visible-devices", true},
      // UUIDs and nonsense: left to CUDA, no crash
      {"CUDA_VISIBLE_DEVICES", "GPU-8f3a,99999999999999999999", "cuda-visible-devices", false},
      {"CUDA_VISIBLE_DEVICES", "7,6,5,4", "cuda-visible-devices", false},
  };
  auto env = healthy_node();
  for (const Case& c : cases) {
    env.variables = {{c.name, c.value}};
    EXPECT_EQ(fires(env, c.check), c.fires) << c.name << "=" << c.value << " " << c.check;
  }
  env.variables = {{"NCCL_DEBUG", "INFO"}, {"NCCL_ALGO", "Ring"}};
  EXPECT_TRUE(ids(env).empty());
}

TEST(ReportChecks, MisspeltNcclVariablesGetTheClosestName) {
  EXPECT_EQ(rep::closest_nccl_variable("NCCL_SOCKET_IFACE"), "NCCL_SOCKET_IFNAME");
  EXPECT_EQ(rep::closest_nccl_variable("NCCL_IB_DISABLED"), "NCCL_IB_DISABLE");
  EXPECT_EQ(rep::closest_nccl_variable("NCCL_SOMETHING_ELSE_ENTIRELY"), "");
  EXPECT_FALSE(rep::describe_variable("NCCL_NET_GDR_LEVEL").empty());
}

TEST(ReportChecks, VersionCodesReadLikeTheLibrariesPrintThem) {
  EXPECT_EQ(rep::cuda_version_text(12040), "12.4");
  EXPECT_EQ(rep::cuda_version_text(13000), "13.0");
  EXPECT_EQ(rep::nccl_version_text(22809), "2.28.9");
  EXPECT_EQ(rep::nccl_version_text(2708), "2.7.8");
  EXPECT_EQ(rep::cudnn_version_text(91900), "9.19.0");
  EXPECT_EQ(rep::cudnn_version_text(8907), "8.9.7");
}
