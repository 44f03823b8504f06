// Choosing and selecting this process's GPU (see cuda_device.h), counting the visible ones, and
// telling device pointers from host ones.
#include <cuda_runtime_api.h>

#include <atomic>
#include <cstdlib>
#include <mutex>
#include <string>

#include "device/cuda_device.h"
#include "device/cuda_error.h"
#include "dsx/error.h"
#include "kernels/device_choice.h"

namespace dsx::device {

namespace {

std::atomic<int> g_device{-1};  // the process's one piece of device state: which GPU is ours
int g_visible = 0;              // how many CUDA saw then (under g_choose)
std::mutex g_choose;

int choose(int local_rank, bool may_share) {
  std::lock_guard lock(g_choose);
  int device = g_device.load();
  if (device < 0) {
    int count = 0;
    const cudaError_t rc = cudaGetDeviceCount(&count);
    if (rc == cudaErrorNoDevice || rc == cudaErrorInsufficientDriver) {
      cudaGetLastError();
      count = 0;
    } else {
      check_cuda(rc, "cudaGetDeviceCount");
    }
    const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
    device = kernels::choose_device(local_rank, count, may_share, visible ? visible : "");
    g_visible = count;
    g_device.store(device);
  } else if (kernels::choose_device(local_rank, g_visible, may_share) != device) {
    throw Error(ErrorKind::Internal, "GPU " + std::to_string(device) + " was chosen for this process, now local rank " +
                                         std::to_string(local_rank) + " asks for another: one process drives one GPU");
  }
  return device;
}

}  // namespace

int use_rank_device(int local_rank, bool may_share) {
  const int device = choose(local_rank, may_share);
  check_cuda(cudaSetDevice(device), "cudaSetDevice(" + std::to_string(device) + ")");
  return device;
}

int use_rank_device() {
  const int known = g_device.load();
  if (known >= 0) {
    check_cuda(cudaSetDevice(known), "cudaSetDevice(" + std::to_string(known) + ")");
    return known;
  }
  return use_rank_device(kernels::parse_local_rank(std::getenv("LOCAL_RANK")),
                         kernels::ranks_may_share_gpu(std::getenv("DSX_COMM_BACKEND")));
}

int chosen_device() { return g_device.load(); }

int use_chosen_device() {
  const int device = g_device.load();
  if (device >= 0) check_cuda(cudaSetDevice(device), "cudaSetDevice(" + std::to_string(device) + ")");
  return device;
}

bool is_device_pointer(const void* data) {
  if (!data || use_chosen_device() < 0) return false;
  cudaPointerAttributes a{};
  if (cudaPointerGetAttributes(&a, data) != cudaSuccess) {
    cudaGetLastError();  // older runtimes report unregistered host memory as an error
    return false;
  }
  return a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged;
}

int cuda_device_count() {
  int count = 0;
  if (cudaGetDeviceCount(&count) == cudaSuccess) return count;
  cudaGetLastError();  // no driver or no GPU: clear the error for the calls after
  return 0;
}

}  // namespace dsx::device
