// The cpu device with shared host memory for communicated buffers (see host_device.h).
#include "comm/host_device.h"

#include "comm/host_memory.h"

namespace dsx::comm {
namespace {

device::CpuDeviceOptions host_device_options(device::CpuDeviceOptions base) {
  base = device::cpu_device_options_from_environment(std::move(base));
  base.allocate_communicated = [](size_t bytes) -> void* {
    return bytes >= kInPlaceMinBytes ? allocate_shared_host(bytes) : nullptr;
  };
  base.free_communicated = [](void* p) { return free_shared_host(p); };
  return base;
}

}  // namespace

std::unique_ptr<device::Device> make_host_device(device::CpuDeviceOptions base) {
  return device::make_cpu_device(host_device_options(std::move(base)));
}

}  // namespace dsx::comm
