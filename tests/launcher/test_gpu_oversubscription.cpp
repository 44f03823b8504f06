// The warning for more ranks on a node than GPUs visible there, on fake machines: a one-GPU
// host with --num_gpus 2 (the lent H200 machine), CUDA_VISIBLE_DEVICES narrower than the ranks,
// and the cases where the runner cannot know (CPU hosts, remote nodes) or nothing is wrong.
// Also the device count itself, read from folders of fake /dev and /sys entries.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "launcher/gpu_oversubscription.h"
#include "launcher/local_devices.h"

using namespace dsx::launcher;

namespace {

LaunchPlan local_plan(const LocalMachine& machine, int num_gpus, const char* hostfile = nullptr) {
  LaunchOptions o;
  o.num_gpus = num_gpus;
  std::optional<std::vector<HostfileEntry>> hf;
  if (hostfile) hf = parse_hostfile(hostfile, "hf");
  return plan_launch(o, hf, machine);
}

std::string warning_for(const LocalMachine& machine, int num_gpus, const char* hostfile = nullptr) {
  return gpu_oversubscription_warning(local_plan(machine, num_gpus, hostfile), machine).value_or("");
}

}  // namespace

TEST(GpuOversubscription, TwoRanksOnAOneGpuHostAreNamedWithWhatToDo) {
  const std::string w = warning_for({1, true, ""}, 2);
  EXPECT_NE(w.find("2 ranks on localhost but 1 GPU visible (found on this host)"), std::string::npos) << w;
  EXPECT_NE(w.find("NCCL refuses two ranks of one communicator on one GPU"), std::string::npos) << w;
  EXPECT_NE(w.find("DSX_COMM_BACKEND=ofi"), std::string::npos) << w;
  EXPECT_NE(w.find("--num_gpus 1"), std::string::npos) << w;
}

TEST(GpuOversubscription, VisibleDevicesNarrowerThanTheRanks) {
  // DeepSpeed's rule: --num_gpus beyond CUDA_VISIBLE_DEVICES takes slots 0..N-1 anyway.
  const std::string w = warning_for({4, true, "2"}, 3);
  EXPECT_NE(w.find("3 ranks on localhost but 1 GPU visible (CUDA_VISIBLE_DEVICES=2)"), std::string::npos) << w;
  // On a host where no GPU was found, CUDA_VISIBLE_DEVICES still says how many the user allows.
  EXPECT_NE(warning_for({1, false, "0,1"}, 4).find("4 ranks on localhost but 2 GPUs visible"), std::string::npos);
}

TEST(GpuOversubscription, NoWarningWhenEachRankHasItsGpu) {
  EXPECT_EQ(warning_for({1, true, ""}, 1), "");
  EXPECT_EQ(warning_for({8, true, ""}, -1), "");  // all 8
  EXPECT_EQ(warning_for({4, true, "1,3"}, -1), "");
  EXPECT_EQ(warning_for({4, true, ""}, 2), "");
}

TEST(GpuOversubscription, NoWarningWhereTheGpusAreUnknown) {
  // A CPU host: slots are processes per NUMA node, not GPUs.
  EXPECT_EQ(warning_for({1, false, ""}, 2), "");
  // A multi-node hostfile job: the other hosts' GPUs are not visible from here.
  const char* two_hosts = "worker-0 slots=4\nworker-1 slots=4\n";
  EXPECT_EQ(warning_for({1, true, ""}, -1, two_hosts), "");
}

TEST(GpuOversubscription, ALocalHostfileJobCountsTheHostsGpus) {
  // One host in the hostfile runs here; its ranks' CUDA_VISIBLE_DEVICES is rewritten from the
  // slots, so the runner's own variable does not count, the host's GPUs do.
  const std::string w = warning_for({1, true, "0,1,2"}, -1, "localhost slots=2\n");
  EXPECT_NE(w.find("2 ranks on localhost but 1 GPU visible (found on this host)"), std::string::npos) << w;
}

TEST(LocalDevices, CountsNvidiaGpusAndElseNumaNodes) {
  const auto root = std::filesystem::path(testing::TempDir()) / ("dsx_devices_" + std::to_string(::getpid()));
  std::filesystem::create_directories(root / "dev");
  std::filesystem::create_directories(root / "node");
  for (const char* name : {"nvidiactl", "nvidia-uvm", "nvidia-caps", "nvidia0", "null"}) std::ofstream(root / "dev" / name);
  for (const char* name : {"node0", "node1", "possible"}) std::ofstream(root / "node" / name);
  DeviceDirs dirs{(root / "dev").string(), (root / "node").string()};

  auto one = detect_local_devices(dirs);
  EXPECT_TRUE(one.gpus);
  EXPECT_EQ(one.count, 1);  // nvidiactl, nvidia-uvm and nvidia-caps are not GPUs

  std::filesystem::remove(root / "dev" / "nvidia0");
  auto cpu = detect_local_devices(dirs);
  EXPECT_FALSE(cpu.gpus);
  EXPECT_EQ(cpu.count, 2);  // one rank per NUMA node

  auto bare = detect_local_devices({(root / "none").string(), (root / "none").string()});
  EXPECT_FALSE(bare.gpus);
  EXPECT_EQ(bare.count, 1);
  std::filesystem::remove_all(root);
}
