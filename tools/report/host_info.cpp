// Reads /proc, /sys, the environment and the interface list; nothing here can fail loudly: a
// missing file just leaves a field empty.
#include "tools/report/host_info.h"

#include <dirent.h>
#include <net/if.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fstream>

#include "kernels/simd.h"

extern char** environ;

namespace dsx::report {

CpuInfo probe_cpu() {
  CpuInfo cpu;
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("model name", 0) == 0 || line.rfind("Model", 0) == 0) {
      auto colon = line.find(':');
      if (colon != std::string::npos) cpu.model = line.substr(std::min(colon + 2, line.size()));
      break;
    }
  }
  cpu.online_cores = static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
  cpu.kernel_simd = kernels::simd_level_name(kernels::simd_level());
#if defined(__x86_64__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("sse4.2")) cpu.simd.push_back("sse4.2");
  if (__builtin_cpu_supports("avx")) cpu.simd.push_back("avx");
  if (__builtin_cpu_supports("avx2")) cpu.simd.push_back("avx2");
  if (__builtin_cpu_supports("fma")) cpu.simd.push_back("fma");
  if (__builtin_cpu_supports("f16c")) cpu.simd.push_back("f16c");
  if (__builtin_cpu_supports("avx512f")) cpu.simd.push_back("avx512f");
  if (__builtin_cpu_supports("avx512bw")) cpu.simd.push_back("avx512bw");
  if (__builtin_cpu_supports("avx512vl")) cpu.simd.push_back("avx512vl");
  if (__builtin_cpu_supports("avx512bf16")) cpu.simd.push_back("avx512bf16");
#elif defined(__aarch64__)
  std::ifstream features("/proc/cpuinfo");
  for (std::string line; std::getline(features, line);) {
    if (line.rfind("Features", 0) != 0) continue;
    for (const char* f : {" asimd", " sve", " sve2", " bf16", " asimdhp"}) {
      if ((line + " ").find(std::string(f) + " ") != std::string::npos) cpu.simd.push_back(f + 1);
    }
    break;
  }
#endif
  return cpu;
}

std::vector<std::string> network_interfaces() {
  std::vector<std::string> names;
  if (struct if_nameindex* list = if_nameindex()) {
    for (auto* i = list; i->if_index != 0; ++i) names.emplace_back(i->if_name);
    if_freenameindex(list);
  }
  return names;
}

std::vector<std::string> rdma_devices() {
  std::vector<std::string> names;
  if (DIR* dir = opendir("/sys/class/infiniband")) {
    while (const dirent* entry = readdir(dir)) {
      if (entry->d_name[0] != '.') names.emplace_back(entry->d_name);
    }
    closedir(dir);
  }
  std::sort(names.begin(), names.end());
  return names;
}

std::vector<std::pair<std::string, std::string>> communication_variables() {
  static const char* prefixes[] = {"NCCL_", "FI_", "OFI_NCCL_", "RDMAV_", "TORCH_NCCL_", "DSX_"};
  static const char* names[] = {"CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER",  "MASTER_ADDR",
                                "MASTER_PORT",          "WORLD_SIZE",         "RANK",
                                "LOCAL_RANK",           "LOCAL_WORLD_SIZE",   "CROSS_SIZE",
                                "DEEPSPEED_TIMEOUT",    "GLOO_SOCKET_IFNAME", "OMP_NUM_THREADS"};
  std::vector<std::pair<std::string, std::string>> vars;
  for (char** e = environ; *e; ++e) {
    std::string entry = *e;
    auto eq = entry.find('=');
    if (eq == std::string::npos) continue;
    std::string name = entry.substr(0, eq);
    bool wanted =
        std::any_of(std::begin(prefixes), std::end(prefixes),
                    [&](const char* p) { return name.rfind(p, 0) == 0; }) ||
        std::any_of(std::begin(names), std::end(names), [&](const char* n) { return name == n; });
    if (wanted) vars.emplace_back(name, entry.substr(eq + 1));
  }
  std::sort(vars.begin(), vars.end());
  return vars;
}

namespace {

int env_int(const char* name) {
  const char* v = std::getenv(name);
  if (!v || !*v) return 0;
  char* end = nullptr;
  long n = std::strtol(v, &end, 10);
  return *end == '\0' && n > 0 && n < 1'000'000 ? static_cast<int>(n) : 0;
}

}  // namespace

JobInfo probe_job(int nodes_flag) {
  if (nodes_flag > 0) return {nodes_flag, "--nodes"};
  if (int n = env_int("CROSS_SIZE")) return {n, "CROSS_SIZE"};
  int world = env_int("WORLD_SIZE"), local = env_int("LOCAL_WORLD_SIZE");
  if (world && local) return {(world + local - 1) / local, "WORLD_SIZE / LOCAL_WORLD_SIZE"};
  world = env_int("OMPI_COMM_WORLD_SIZE");
  local = env_int("OMPI_COMM_WORLD_LOCAL_SIZE");
  if (world && local)
    return {(world + local - 1) / local, "OMPI_COMM_WORLD_SIZE / OMPI_COMM_WORLD_LOCAL_SIZE"};
  if (int n = env_int("SLURM_JOB_NUM_NODES")) return {n, "SLURM_JOB_NUM_NODES"};
  if (int n = env_int("SLURM_NNODES")) return {n, "SLURM_NNODES"};
  return {1, "default (no job variables set; pass --nodes)"};
}

}  // namespace dsx::report
