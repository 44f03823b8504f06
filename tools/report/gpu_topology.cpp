// NVML's C API is declared here by hand (the few calls we make, with the structs as nvml.h
// defines them) so the CPU-only build needs no NVIDIA headers.
#include "tools/report/gpu_topology.h"

#include <dlfcn.h>

#include <algorithm>
#include <cctype>
#include <fstream>

namespace dsx::report {

const char* to_string(GpuLink link) {
  switch (link) {
    case GpuLink::Self: return "X";
    case GpuLink::NvLink: return "NV";
    case GpuLink::Pix: return "PIX";
    case GpuLink::Pxb: return "PXB";
    case GpuLink::Phb: return "PHB";
    case GpuLink::Node: return "NODE";
    case GpuLink::Sys: return "SYS";
    case GpuLink::Unknown: return "?";
  }
  return "?";
}

namespace {

using nvmlDevice = void*;
struct NvmlMemory {
  unsigned long long total, free, used;
};
struct NvmlPciInfo {
  char bus_id_legacy[16];
  unsigned int domain, bus, device, pci_device_id, pci_subsystem_id;
  char bus_id[32];
};
constexpr int kNvmlSuccess = 0;
constexpr unsigned kMaxNvLinks = 18;  // NVML_NVLINK_MAX_LINKS
constexpr int kNvLinkToSwitch = 2;    // NVML_NVLINK_DEVICE_TYPE_SWITCH

struct Nvml {
  int (*init)();
  int (*shutdown)();
  const char* (*error_string)(int);
  int (*driver_version)(char*, unsigned);
  int (*count)(unsigned*);
  int (*handle)(unsigned, nvmlDevice*);
  int (*name)(nvmlDevice, char*, unsigned);
  int (*memory)(nvmlDevice, NvmlMemory*);
  int (*pci)(nvmlDevice, NvmlPciInfo*);
  int (*common_ancestor)(nvmlDevice, nvmlDevice, int*);
  int (*nvlink_state)(nvmlDevice, unsigned, int*);
  int (*nvlink_remote_pci)(nvmlDevice, unsigned, NvmlPciInfo*);
  int (*nvlink_remote_type)(nvmlDevice, unsigned, int*);
};

template <typename Fn>
void bind(void* lib, Fn& fn, const char* name) {
  fn = reinterpret_cast<Fn>(dlsym(lib, name));
}

// "00000000:07:00.0" (NVML) and "0000:07:00.0" (sysfs) name the same device.
std::string normal_bus_id(const char* id) {
  std::string s(id);
  if (s.size() > 12) s = s.substr(s.size() - 12);
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

int numa_node_of(const std::string& bus_id) {
  std::ifstream in("/sys/bus/pci/devices/" + bus_id + "/numa_node");
  int node = -1;
  in >> node;
  return in ? node : -1;
}

GpuLink link_from_ancestor(int level) {
  switch (level) {
    case 0:  // same board
    case 10: return GpuLink::Pix;
    case 20: return GpuLink::Pxb;
    case 30: return GpuLink::Phb;
    case 40: return GpuLink::Node;
    case 50: return GpuLink::Sys;
  }
  return GpuLink::Unknown;
}

struct NvLinks {
  std::vector<std::string> peers;  // bus ids at the other end of direct GPU links
  int to_switch = 0;               // links into an NVSwitch
};

NvLinks nvlinks_of(const Nvml& nvml, nvmlDevice dev) {
  NvLinks links;
  if (!nvml.nvlink_state) return links;
  for (unsigned l = 0; l < kMaxNvLinks; ++l) {
    int active = 0;
    if (nvml.nvlink_state(dev, l, &active) != kNvmlSuccess || !active) continue;
    int type = -1;
    if (nvml.nvlink_remote_type && nvml.nvlink_remote_type(dev, l, &type) == kNvmlSuccess &&
        type == kNvLinkToSwitch) {
      ++links.to_switch;
      continue;
    }
    NvmlPciInfo remote{};
    if (nvml.nvlink_remote_pci && nvml.nvlink_remote_pci(dev, l, &remote) == kNvmlSuccess) {
      links.peers.push_back(normal_bus_id(remote.bus_id));
    }
  }
  return links;
}

// The NVML calls dsx makes, bound from the loaded library (null where it lacks one).
Nvml bind_nvml(void* lib) {
  Nvml nvml{};
  bind(lib, nvml.init, "nvmlInit_v2");
  bind(lib, nvml.shutdown, "nvmlShutdown");
  bind(lib, nvml.error_string, "nvmlErrorString");
  bind(lib, nvml.driver_version, "nvmlSystemGetDriverVersion");
  bind(lib, nvml.count, "nvmlDeviceGetCount_v2");
  bind(lib, nvml.handle, "nvmlDeviceGetHandleByIndex_v2");
  bind(lib, nvml.name, "nvmlDeviceGetName");
  bind(lib, nvml.memory, "nvmlDeviceGetMemoryInfo");
  bind(lib, nvml.pci, "nvmlDeviceGetPciInfo_v3");
  bind(lib, nvml.common_ancestor, "nvmlDeviceGetTopologyCommonAncestor");
  bind(lib, nvml.nvlink_state, "nvmlDeviceGetNvLinkState");
  bind(lib, nvml.nvlink_remote_pci, "nvmlDeviceGetNvLinkRemotePciInfo_v2");
  bind(lib, nvml.nvlink_remote_type, "nvmlDeviceGetNvLinkRemoteDeviceType");
  return nvml;
}

// Each GPU NVML sees: its name, memory, PCI address and NUMA node, and its NVLinks.
void read_gpus(const Nvml& nvml, unsigned count, GpuTopology& topo, std::vector<nvmlDevice>& devices,
               std::vector<NvLinks>& nvlinks) {
  for (unsigned i = 0; i < count; ++i) {
    nvmlDevice dev = nullptr;
    if (nvml.handle(i, &dev) != kNvmlSuccess) continue;
    GpuInfo gpu;
    gpu.index = static_cast<int>(i);
    char name[96] = {};
    if (nvml.name && nvml.name(dev, name, sizeof name) == kNvmlSuccess) gpu.name = name;
    NvmlMemory mem{};
    if (nvml.memory && nvml.memory(dev, &mem) == kNvmlSuccess)
      gpu.memory_bytes = static_cast<int64_t>(mem.total);
    NvmlPciInfo pci{};
    if (nvml.pci && nvml.pci(dev, &pci) == kNvmlSuccess) gpu.bus_id = normal_bus_id(pci.bus_id);
    gpu.numa_node = numa_node_of(gpu.bus_id);
    topo.gpus.push_back(gpu);
    devices.push_back(dev);
    nvlinks.push_back(nvlinks_of(nvml, dev));
  }
}

// How each pair of GPUs is connected: NVLink (direct or through NVSwitch), else the PCIe level
// of their closest common ancestor.
void link_gpus(const Nvml& nvml, const std::vector<nvmlDevice>& devices, const std::vector<NvLinks>& nvlinks,
               GpuTopology& topo) {
  const size_t n = devices.size();
  topo.links.assign(n, std::vector<GpuLink>(n, GpuLink::Unknown));
  topo.nvlink_counts.assign(n, std::vector<int>(n, 0));
  for (size_t i = 0; i < n; ++i) {
    for (size_t j = 0; j < n; ++j) {
      if (i == j) {
        topo.links[i][j] = GpuLink::Self;
        continue;
      }
      int direct = static_cast<int>(
          std::count(nvlinks[i].peers.begin(), nvlinks[i].peers.end(), topo.gpus[j].bus_id));
      // Behind NVSwitch every GPU reaches every other with all its switch links.
      int switched = std::min(nvlinks[i].to_switch, nvlinks[j].to_switch);
      topo.nvlink_counts[i][j] = direct + switched;
      int level = -1;
      if (topo.nvlink_counts[i][j] > 0) {
        topo.links[i][j] = GpuLink::NvLink;
      } else if (nvml.common_ancestor &&
                 nvml.common_ancestor(devices[i], devices[j], &level) == kNvmlSuccess) {
        topo.links[i][j] = link_from_ancestor(level);
      }
    }
  }
}

}  // namespace

GpuTopology probe_gpu_topology() {
  GpuTopology topo;
  void* lib = dlopen("libnvidia-ml.so.1", RTLD_LAZY | RTLD_LOCAL);
  if (!lib) {
    topo.unavailable_reason =
        std::string("NVML not found (") + dlerror() +
        "): no NVIDIA driver on this host, so no GPU can be used; dsx runs on "
        "CPUs with the libfabric backend";
    return topo;
  }
  const Nvml nvml = bind_nvml(lib);
  if (!nvml.init || !nvml.count || !nvml.handle || !nvml.error_string) {
    topo.unavailable_reason =
        "libnvidia-ml.so.1 lacks nvmlInit_v2/nvmlDeviceGetCount_v2: the driver is too old";
    return topo;
  }
  topo.nvml_loaded = true;
  if (int rc = nvml.init(); rc != kNvmlSuccess) {
    topo.unavailable_reason = std::string("NVML could not start: ") + nvml.error_string(rc) +
                              " (is the NVIDIA kernel module loaded? try nvidia-smi)";
    return topo;
  }
  char text[96] = {};
  if (nvml.driver_version && nvml.driver_version(text, sizeof text) == kNvmlSuccess)
    topo.driver_version = text;
  unsigned count = 0;
  if (int rc = nvml.count(&count); rc != kNvmlSuccess) {
    topo.unavailable_reason = std::string("NVML could not count GPUs: ") + nvml.error_string(rc);
    return topo;
  }
  if (count == 0) topo.unavailable_reason = "the driver sees no GPU";

  std::vector<nvmlDevice> devices;
  std::vector<NvLinks> nvlinks;
  read_gpus(nvml, count, topo, devices, nvlinks);
  link_gpus(nvml, devices, nvlinks, topo);
  if (nvml.shutdown) nvml.shutdown();
  return topo;
}

}  // namespace dsx::report
