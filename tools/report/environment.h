// What `dsx report` knows about this machine: a plain snapshot filled by the probes
// (host_info, cuda_libraries, gpu_topology, fabric_providers) and read by the checks. Keeping
// it plain data lets the checks be tested on made-up machines.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace dsx::report {

struct BuildInfo {
  std::string version;
  bool cuda = false;
  std::string compiler;
  long cxx_standard = 0;
  std::string libfabric_header;  // the libfabric dsx was compiled against, "1.17"
  // Versions of the CUDA headers a CUDA build was compiled against (0 in CPU-only builds), in
  // the libraries' own codes: CUDART_VERSION, NCCL_VERSION_CODE, CUDNN_VERSION.
  int cudart_code = 0;
  int nccl_code = 0;
  int cudnn_code = 0;
};

struct CpuInfo {
  std::string model;
  int online_cores = 0;
  std::vector<std::string> simd;  // instruction-set extensions this CPU has, of those that matter
  std::string kernel_simd;        // the path dsx's CPU kernels take (DSX_SIMD may lower it)
};

// One shared library found (or not) with dlopen.
struct LibraryInfo {
  std::string name;  // "CUDA runtime", "NCCL", ...
  bool found = false;
  std::string path;      // where it was loaded from
  std::string version;   // "13.0", "2.28.9"
  int version_code = 0;  // the library's own integer code (cudart 13000, NCCL 22809, cuDNN 91900)
  std::string note;      // why it is missing, or an extra fact (cuDNN's CUDA version)
};

struct CudaStack {
  LibraryInfo runtime;  // libcudart
  LibraryInfo driver;   // libcuda: the CUDA version the installed driver supports
  LibraryInfo cublas;
  LibraryInfo cudnn;
  LibraryInfo nccl;
  int cudnn_cudart_code = 0;  // the CUDA runtime cuDNN was built for (cudnnGetCudartVersion)
};

struct FabricProvider {
  std::string name;  // what was asked: "tcp", "efa"
  bool usable = false;
  std::string provider;  // what answered: "tcp;ofi_rxm"
  std::string detail;    // fabric/domain name or the error
};

struct FabricInfo {
  bool loaded = false;
  std::string version;  // fi_version() of the library actually loaded
  int major = 0, minor = 0;
  std::vector<FabricProvider> providers;
};

// How two GPUs reach each other, in nvidia-smi topo -m's words.
enum class GpuLink { Self, NvLink, Pix, Pxb, Phb, Node, Sys, Unknown };
const char* to_string(GpuLink link);

struct GpuInfo {
  int index = 0;
  std::string name;
  int64_t memory_bytes = 0;
  std::string bus_id;  // "0000:07:00.0"
  int numa_node = -1;
};

struct GpuTopology {
  bool nvml_loaded = false;
  std::string driver_version;
  std::string unavailable_reason;  // why no GPU could be listed
  std::vector<GpuInfo> gpus;
  std::vector<std::vector<GpuLink>> links;      // links[i][j]
  std::vector<std::vector<int>> nvlink_counts;  // NVLinks between i and j (NV# in nvidia-smi)
};

struct JobInfo {
  int nodes = 1;
  std::string nodes_source;  // the flag or variable the node count came from
};

struct Environment {
  BuildInfo build;
  CpuInfo cpu;
  CudaStack cuda;
  FabricInfo fabric;
  GpuTopology gpus;
  std::vector<std::string> interfaces;    // network interfaces (if_nameindex)
  std::vector<std::string> rdma_devices;  // /sys/class/infiniband: InfiniBand HCAs and EFA devices
  std::vector<std::pair<std::string, std::string>> variables;  // NCCL_*, FI_*, ... that are set
  JobInfo job;
};

// Fills everything from the real machine. nodes_flag > 0 overrides the node count found in
// the environment (WORLD_SIZE / LOCAL_WORLD_SIZE, SLURM_NNODES, ...).
Environment probe_environment(const std::string& dsx_version, int nodes_flag);

}  // namespace dsx::report
