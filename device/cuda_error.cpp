// See cuda_error.h.
#include "device/cuda_error.h"

#include "dsx/error.h"

namespace dsx::device {

void check_cuda(cudaError_t status, const std::string& what) {
  if (status == cudaSuccess) return;
  cudaGetLastError();  // a non-sticky error is reported once, here
  ErrorKind kind = ErrorKind::Internal;
  std::string hint;
  if (status == cudaErrorMemoryAllocation) {
    kind = ErrorKind::OutOfMemory;
    hint = "; use a higher ZeRO stage, more ranks, or a smaller model or batch";
  } else if (status == cudaErrorNoDevice || status == cudaErrorInsufficientDriver) {
    kind = ErrorKind::Unsupported;
    hint = "; check the driver and CUDA_VISIBLE_DEVICES";
  }
  throw Error(kind, what + " failed: " + cudaGetErrorString(status) + hint);
}

}  // namespace dsx::device
