// make_cuda_device in a build without CUDA: a clear refusal instead of a missing symbol.
#ifndef DSX_HAVE_CUDA
#include "device/cuda_device.h"
#include "dsx/error.h"

namespace dsx::device {

std::unique_ptr<Device> make_cuda_device() {
  throw Error(ErrorKind::Unsupported, "this dsx was built without CUDA: no GPU device (rebuild with -DDSX_CUDA=ON)");
}

}  // namespace dsx::device
#endif
