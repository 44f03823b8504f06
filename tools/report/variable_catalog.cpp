// The catalog. NCCL_TIMEOUT is deliberately absent: it does not exist (ref: comm.md 2.3).
#include "tools/report/variable_catalog.h"

#include <algorithm>
#include <array>
#include <utility>
#include <vector>

namespace dsx::report {

namespace {

using Entry = std::pair<const char*, const char*>;

constexpr std::array kNccl = {
    Entry{"NCCL_DEBUG",
          "NCCL log level (VERSION, WARN, INFO, TRACE); INFO shows the transports chosen"},
    Entry{"NCCL_DEBUG_SUBSYS", "which NCCL subsystems log (INIT, NET, GRAPH, ...)"},
    Entry{"NCCL_DEBUG_FILE", "NCCL log file pattern (%h host, %p pid)"},
    Entry{"NCCL_SOCKET_IFNAME",
          "interfaces for NCCL's bootstrap and socket transport: prefixes, =exact, ^exclude"},
    Entry{"NCCL_SOCKET_FAMILY", "AF_INET or AF_INET6 for NCCL's sockets"},
    Entry{"NCCL_SOCKET_NTHREADS", "CPU threads per socket connection"},
    Entry{"NCCL_NSOCKS_PERTHREAD", "sockets per helper thread"},
    Entry{"NCCL_IB_DISABLE",
          "1 = do not use InfiniBand/RoCE verbs; inter-node traffic falls back to sockets or a net "
          "plugin"},
    Entry{"NCCL_IB_HCA", "which RDMA devices (and ports) NCCL uses: prefixes, =exact, ^exclude"},
    Entry{"NCCL_IB_TIMEOUT", "verbs transport timeout, 4.096 us x 2^value (default 20)"},
    Entry{"NCCL_IB_RETRY_CNT", "verbs retries before an error"},
    Entry{"NCCL_IB_GID_INDEX", "RoCE GID index"},
    Entry{"NCCL_IB_TC", "InfiniBand traffic class"},
    Entry{"NCCL_IB_SL", "InfiniBand service level"},
    Entry{"NCCL_IB_QPS_PER_CONNECTION", "queue pairs per connection"},
    Entry{"NCCL_IB_PCI_RELAXED_ORDERING", "PCI relaxed ordering for IB (virtualised hosts)"},
    Entry{"NCCL_IB_ADAPTIVE_ROUTING", "InfiniBand adaptive routing"},
    Entry{"NCCL_NET_GDR_LEVEL",
          "largest GPU-NIC distance at which GPUDirect RDMA is used (LOC, PIX, PXB, PHB, SYS)"},
    Entry{"NCCL_NET_GDR_READ", "use GPUDirect RDMA for sends too"},
    Entry{"NCCL_P2P_LEVEL",
          "largest GPU-GPU distance at which P2P is used (LOC, NVL, PIX, PXB, PHB, SYS)"},
    Entry{"NCCL_P2P_DISABLE",
          "1 = no direct GPU-GPU transfers (NVLink, PCIe P2P); intra-node traffic goes through "
          "host memory"},
    Entry{"NCCL_SHM_DISABLE", "1 = no shared-memory transport between processes on one host"},
    Entry{"NCCL_ALGO",
          "force collective algorithms (Ring, Tree, CollnetChain, CollnetDirect, NVLS, NVLSTree, "
          "PAT)"},
    Entry{"NCCL_PROTO",
          "force protocols (LL, LL128, Simple); NVIDIA advises setting it only to rule out a bug"},
    Entry{"NCCL_BUFFSIZE", "buffer per channel between two ranks (default 4 MiB)"},
    Entry{"NCCL_MIN_NCHANNELS", "lower bound on channels (parallel rings/trees)"},
    Entry{"NCCL_MAX_NCHANNELS", "upper bound on channels"},
    Entry{"NCCL_MIN_CTAS", "lower bound on CTAs per collective"},
    Entry{"NCCL_MAX_CTAS", "upper bound on CTAs per collective"},
    Entry{"NCCL_P2P_NET_CHUNKSIZE", "chunk size of point-to-point network transfers"},
    Entry{"NCCL_NET", "force a network: IB, Socket, or a plugin's name (e.g. AWS Libfabric)"},
    Entry{"NCCL_NET_PLUGIN", "net plugin to load (suffix of libnccl-net-<x>.so, a file, or none)"},
    Entry{"NCCL_TUNER_PLUGIN", "tuner plugin to load (e.g. aws-ofi-nccl's libnccl-ofi-tuner.so)"},
    Entry{"NCCL_CUMEM_ENABLE", "use cuMem* allocations for NCCL buffers"},
    Entry{"NCCL_CUMEM_HOST_ENABLE", "0 = use /dev/shm instead of cuMem host memory (containers)"},
    Entry{"NCCL_NVLS_ENABLE", "NVLink SHARP (in-switch reduction) on NVSwitch systems"},
    Entry{"NCCL_COLLNET_ENABLE", "in-network reduction (SHARP) over the network"},
    Entry{"NCCL_CROSS_NIC", "allow rings/trees to use different NICs on different nodes"},
    Entry{"NCCL_COMM_BLOCKING", "0 = non-blocking communicators for all"},
    Entry{"NCCL_LAUNCH_MODE", "PARALLEL or GROUP kernel launches"},
    Entry{"NCCL_RAS_ENABLE", "NCCL's health-query service (2.24+)"},
    Entry{"NCCL_RAS_ADDR", "address of the RAS service (default localhost:28028)"},
    Entry{"NCCL_TOPO_FILE", "XML topology to use instead of probing (VMs)"},
    Entry{"NCCL_TOPO_DUMP_FILE", "where NCCL writes the topology it detected"},
    Entry{"NCCL_GRAPH_FILE", "XML search result to use instead of searching"},
    Entry{"NCCL_GRAPH_DUMP_FILE", "where NCCL writes its graph search result"},
    Entry{"NCCL_COMM_ID", "ip:port of the bootstrap root, instead of a unique id"},
    Entry{"NCCL_NET_FORCE_FLUSH", "flush GPUDirect RDMA receives (0 on p5 per aws-ofi-nccl)"},
    Entry{"NCCL_IGNORE_CPU_AFFINITY", "ignore the job's CPU affinity when binding NCCL threads"},
    Entry{"NCCL_NVLS_CHUNKSIZE", "NVLS chunk size"},
    Entry{"NCCL_ASYNC_ERROR_HANDLING", "PyTorch's old name for TORCH_NCCL_ASYNC_ERROR_HANDLING"},
    Entry{"NCCL_BLOCKING_WAIT", "PyTorch's old name for TORCH_NCCL_BLOCKING_WAIT"},
};

constexpr std::array kOthers = {
    Entry{"FI_PROVIDER",
          "libfabric providers allowed (comma list, ^ excludes): efa, tcp, shm, ..."},
    Entry{"FI_LOG_LEVEL", "libfabric logging: warn, trace, info, debug"},
    Entry{"FI_LOG_PROV", "only log this provider"},
    Entry{"FI_LOG_SUBSYS", "only log this subsystem"},
    Entry{"FI_PROVIDER_PATH", "where libfabric looks for provider plugins"},
    Entry{"FI_EFA_USE_DEVICE_RDMA",
          "force (1) or forbid (0) EFA device RDMA; not needed with libfabric >= 1.18; 1 aborts "
          "without RDMA hardware"},
    Entry{"FI_EFA_FORK_SAFE", "EFA fork() support; only for kernels older than 5.15"},
    Entry{"FI_EFA_USE_HUGE_PAGE",
          "0 = no huge pages for EFA buffers (fixes fork ENOMEM with data-loader workers)"},
    Entry{"FI_EFA_ENABLE_SHM_TRANSFER", "EFA hands same-host peers to shm (default on)"},
    Entry{"FI_EFA_IFACE", "which EFA devices to use"},
    Entry{"FI_EFA_TX_SIZE", "EFA send queue depth"},
    Entry{"FI_EFA_RX_SIZE", "EFA receive queue depth"},
    Entry{"FI_EFA_SET_CUDA_SYNC_MEMOPS",
          "0 works around 'Unable to register memory (type = 2)' with old EFA installers"},
    Entry{"FI_HMEM_DISABLE_P2P", "copy GPU memory through the host instead of peer-to-peer"},
    Entry{"FI_HMEM_CUDA_USE_GDRCOPY", "use GDRCopy for small GPU copies"},
    Entry{"FI_OFI_RXM_BUFFER_SIZE", "tcp/verbs eager message limit (bigger ones use rendezvous)"},
    Entry{"FI_TCP_IFACE", "the interface libfabric's tcp provider uses"},
    Entry{"FI_SOCKETS_IFACE", "the interface libfabric's sockets provider uses"},
    Entry{"FI_TCP_PORT_LOW_RANGE", "lowest port libfabric's tcp provider listens on"},
    Entry{"FI_TCP_PORT_HIGH_RANGE", "highest port libfabric's tcp provider listens on"},
    Entry{"FI_SHM_DISABLE_CMA", "shm without process_vm_readv (containers without SYS_PTRACE)"},
    Entry{"FI_UNIVERSE_SIZE", "expected number of peers (sizes address vectors)"},
    Entry{"FI_MR_CACHE_MAX_SIZE", "bytes libfabric's registration cache may hold"},
    Entry{"FI_MR_CACHE_MAX_COUNT", "regions the registration cache may hold (0 disables it)"},
    Entry{"FI_MR_CACHE_MONITOR", "how the registration cache notices freed memory"},
    Entry{"OFI_NCCL_PROTOCOL", "aws-ofi-nccl protocol: SENDRECV or RDMA"},
    Entry{"OFI_NCCL_EXCLUDE_TCP_IF", "interfaces aws-ofi-nccl's tcp fallback ignores"},
    Entry{"OFI_NCCL_DISABLE_GDR_REQUIRED_CHECK",
          "let aws-ofi-nccl run without GPUDirect RDMA on p4d/p5"},
    Entry{"TORCH_NCCL_ASYNC_ERROR_HANDLING",
          "PyTorch: what to do when a collective fails or times out"},
    Entry{"TORCH_NCCL_BLOCKING_WAIT", "PyTorch: wait() blocks and raises on timeout"},
    Entry{"TORCH_NCCL_ENABLE_MONITORING", "PyTorch: kill the process when the watchdog is stuck"},
    Entry{"TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC", "PyTorch: how long the watchdog may be stuck"},
    Entry{"TORCH_NCCL_DUMP_ON_TIMEOUT", "PyTorch: dump the flight recorder on timeout"},
    Entry{"CUDA_VISIBLE_DEVICES", "which GPUs this process sees, renumbered from 0"},
    Entry{"CUDA_DEVICE_ORDER", "PCI_BUS_ID makes CUDA's numbering match nvidia-smi's"},
    Entry{"MASTER_ADDR", "address of rank 0's rendezvous store (rank 0's private IP)"},
    Entry{"MASTER_PORT", "port of the rendezvous store"},
    Entry{"WORLD_SIZE", "processes in the job"},
    Entry{"RANK", "this process's global rank"},
    Entry{"LOCAL_RANK", "this process's rank on its node (its GPU)"},
    Entry{"LOCAL_WORLD_SIZE", "processes on this node"},
    Entry{"CROSS_SIZE", "nodes in the job"},
    Entry{"DEEPSPEED_TIMEOUT", "collective timeout in minutes (DeepSpeed's; dsx reads it too)"},
    Entry{"DSX_COMM_TIMEOUT",
          "dsx: seconds one collective may wait for a peer before failing and naming it"},
    Entry{"DSX_STORE_TIMEOUT",
          "dsx: seconds ranks wait for each other at the rendezvous (default 300)"},
    Entry{"DSX_COMM_BACKEND", "dsx: communication backend (nccl or ofi)"},
    Entry{"DSX_DEVICE_MEMORY", "dsx: bytes one rank may hold (dsx train --device_memory); past it: out of memory, exit 3"},
    Entry{"DSX_SIMD", "dsx: lowers the SIMD path of the CPU kernels (avx512, avx2, scalar)"},
    Entry{"OMP_NUM_THREADS", "threads of dsx's CPU kernels (OpenMP)"},
    Entry{"DSX_OFI_PROVIDER",
          "dsx: the libfabric provider the ofi backend uses (shm, tcp, efa, ...)"},
    Entry{"GLOO_SOCKET_IFNAME", "the interface Gloo uses"},
};

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] != b[j - 1])});
      diagonal = up;
    }
  }
  return row[b.size()];
}

}  // namespace

std::string describe_variable(const std::string& name) {
  for (const auto& table : {std::vector<Entry>(kNccl.begin(), kNccl.end()),
                            std::vector<Entry>(kOthers.begin(), kOthers.end())}) {
    for (const auto& [n, text] : table) {
      if (name == n) return text;
    }
  }
  if (name == "NCCL_TIMEOUT") return "nothing: NCCL has no such variable (see the checks)";
  if (name.rfind("FI_", 0) == 0) return "a libfabric setting (`fi_info -e` describes every one)";
  if (name.rfind("RDMAV_", 0) == 0) return "an rdma-core (libibverbs) setting";
  if (name.rfind("OFI_NCCL_", 0) == 0) return "an aws-ofi-nccl setting";
  if (name.rfind("TORCH_NCCL_", 0) == 0) return "a PyTorch ProcessGroupNCCL setting";
  if (name.rfind("DSX_", 0) == 0) return "a dsx setting";
  return "";
}

std::string closest_nccl_variable(const std::string& name) {
  std::string best;
  size_t best_distance = 4;  // beyond three edits it is a different word, not a typo
  for (const auto& [n, text] : kNccl) {
    size_t d = edit_distance(name, n);
    if (d < best_distance) {
      best_distance = d;
      best = n;
    }
  }
  return best;
}

}  // namespace dsx::report
