// The cpu device as ranks on one host use it: buffers that collectives read (Placement::
// Communicated, at least kInPlaceMinBytes) come from shared host memory, which the ranks of a
// host reduce in place; the stream-order checker and random delays follow DSX_STREAM_CHECK and
// DSX_STREAM_DELAY_US (device/cpu_device.h).
#pragma once

#include <memory>

#include "device/cpu_device.h"

namespace dsx::comm {

std::unique_ptr<device::Device> make_host_device(device::CpuDeviceOptions base = {});

}  // namespace dsx::comm
