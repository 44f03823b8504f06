// What the environment variables of multi-GPU jobs do, in one line each (NCCL's env.rst,
// libfabric's fi_*(7) pages, aws-ofi-nccl, PyTorch), for `dsx report` to explain the ones set.
#pragma once

#include <string>

namespace dsx::report {

// The description, or "" when the variable is not one we know.
std::string describe_variable(const std::string& name);

// The known NCCL_* variable closest to a misspelt one ("NCCL_SOCKET_IFACE" → "NCCL_SOCKET_IFNAME"),
// or "" when none is close.
std::string closest_nccl_variable(const std::string& name);

}  // namespace dsx::report
