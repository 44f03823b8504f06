// The cuda device's entry points in a build without CUDA: a clear refusal instead of a missing
// symbol, and no GPU to count or choose.
#ifndef DSX_HAVE_CUDA
#include "device/cuda_device.h"
#include "dsx/error.h"

namespace dsx::device {
namespace {

[[noreturn]] void refuse() {
  throw Error(ErrorKind::Unsupported,
              "this dsx was built without CUDA: no GPU device (rebuild with -DDSX_CUDA=ON)");
}

}  // namespace

std::unique_ptr<Device> make_cuda_device() { refuse(); }
int cuda_device_count() { return 0; }
int use_rank_device() { refuse(); }
int use_rank_device(int, bool) { refuse(); }
int chosen_device() { return -1; }
int use_chosen_device() { return -1; }
bool is_device_pointer(const void*) { return false; }

}  // namespace dsx::device
#endif
