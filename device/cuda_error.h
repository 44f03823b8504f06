// The one CUDA error check of dsx (internal to device/, CUDA builds only): a failed runtime call
// becomes a dsx::Error that names the call and what to check.
#pragma once

#include <cuda_runtime_api.h>

#include <string>

namespace dsx::device {

// Throws Error(OutOfMemory) for an allocation failure, Error(Unsupported) for a missing GPU or
// driver, Error(Internal) otherwise; `what` names the call ("cudaMalloc of the gradients").
// Clears CUDA's last error first, so a later unrelated check does not see it again.
void check_cuda(cudaError_t status, const std::string& what);

}  // namespace dsx::device
