// A stand-in libnvidia-ml.so.1 for testing `dsx report`'s GPU topology on machines without an
// NVIDIA driver. It answers the NVML calls dsx makes (same C signatures and structs as nvml.h)
// for a made-up machine chosen by FAKE_NVML_TOPOLOGY:
//   nvswitch8  8 H100s, 18 NVLinks each into NVSwitch, one NUMA node per 4 GPUs
//   pcie4      4 A100 PCIe, GPU0-GPU1 bridged by 4 NVLinks, GPU2 and GPU3 on one PCIe switch,
//              the two pairs on different CPU sockets
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace {

struct PciInfo {
  char bus_id_legacy[16];
  unsigned int domain, bus, device, pci_device_id, pci_subsystem_id;
  char bus_id[32];
};
struct Memory {
  unsigned long long total, free, used;
};
using Device = void*;

bool nvswitch() {
  const char* t = std::getenv("FAKE_NVML_TOPOLOGY");
  return !t || std::string(t) != "pcie4";
}
unsigned gpu_count() { return nvswitch() ? 8 : 4; }
unsigned index_of(Device d) { return static_cast<unsigned>(reinterpret_cast<uintptr_t>(d)) - 1; }
void bus_id_of(unsigned index, char* out) {
  std::snprintf(out, 32, "00000000:%02X:00.0", 0x10 + index);
}

}  // namespace

extern "C" {

int nvmlInit_v2() { return 0; }
int nvmlShutdown() { return 0; }
const char* nvmlErrorString(int) { return "fake NVML error"; }

int nvmlSystemGetDriverVersion(char* version, unsigned length) {
  std::snprintf(version, length, "%s", "550.54.15");
  return 0;
}

int nvmlDeviceGetCount_v2(unsigned* count) {
  *count = gpu_count();
  return 0;
}

int nvmlDeviceGetHandleByIndex_v2(unsigned index, Device* device) {
  if (index >= gpu_count()) return 2;  // NVML_ERROR_INVALID_ARGUMENT
  *device = reinterpret_cast<Device>(static_cast<uintptr_t>(index + 1));
  return 0;
}

int nvmlDeviceGetName(Device, char* name, unsigned length) {
  std::snprintf(name, length, "%s", nvswitch() ? "NVIDIA H100 80GB HBM3" : "NVIDIA A100-PCIE-40GB");
  return 0;
}

int nvmlDeviceGetMemoryInfo(Device, Memory* memory) {
  memory->total = (nvswitch() ? 81559ull : 40960ull) << 20;
  memory->free = memory->total;
  memory->used = 0;
  return 0;
}

int nvmlDeviceGetPciInfo_v3(Device device, PciInfo* pci) {
  std::memset(pci, 0, sizeof *pci);
  bus_id_of(index_of(device), pci->bus_id);
  return 0;
}

// NVML_TOPOLOGY_SINGLE 10, NODE 40, SYSTEM 50.
int nvmlDeviceGetTopologyCommonAncestor(Device a, Device b, int* level) {
  const unsigned i = index_of(a), j = index_of(b);
  if (nvswitch()) {
    *level = i / 4 == j / 4 ? 40 : 50;
  } else {
    *level = i / 2 == j / 2 ? 10 : 50;
  }
  return 0;
}

int nvmlDeviceGetNvLinkState(Device device, unsigned link, int* active) {
  const unsigned i = index_of(device);
  *active = nvswitch() ? link < 18 : (i < 2 && link < 4);
  return 0;
}

int nvmlDeviceGetNvLinkRemoteDeviceType(Device, unsigned, int* type) {
  *type = nvswitch() ? 2 : 0;  // NVML_NVLINK_DEVICE_TYPE_SWITCH : _GPU
  return 0;
}

int nvmlDeviceGetNvLinkRemotePciInfo_v2(Device device, unsigned, PciInfo* pci) {
  std::memset(pci, 0, sizeof *pci);
  bus_id_of(index_of(device) == 0 ? 1 : 0, pci->bus_id);  // the bridge joins GPU0 and GPU1
  return 0;
}

}  // extern "C"
