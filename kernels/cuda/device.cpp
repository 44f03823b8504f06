// Choosing and selecting this process's GPU (see device.h).
#include "kernels/cuda/device.h"

#include <cuda_runtime_api.h>

#include <atomic>
#include <cstdlib>
#include <mutex>
#include <string>

#include "dsx/error.h"
#include "kernels/device_choice.h"

namespace dsx::kernels::cuda {

namespace {

std::atomic<int> g_device{-1};  // the process's one piece of device state: which GPU is ours
int g_visible = 0;              // how many CUDA saw then (under g_choose)
std::mutex g_choose;

void check(cudaError_t rc, const std::string& what) {
  if (rc != cudaSuccess) {
    throw Error(rc == cudaErrorNoDevice || rc == cudaErrorInsufficientDriver ? ErrorKind::Unsupported
                                                                                : ErrorKind::Internal,
                what + " failed: " + cudaGetErrorString(rc) + "; check the driver and CUDA_VISIBLE_DEVICES");
  }
}

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
      check(rc, "cudaGetDeviceCount");
    }
    const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
    device = choose_device(local_rank, count, may_share, visible ? visible : "");
    g_visible = count;
    g_device.store(device);
  } else if (choose_device(local_rank, g_visible, may_share) != device) {
    throw Error(ErrorKind::Internal, "GPU " + std::to_string(device) + " was chosen for this process, now local rank " +
                                         std::to_string(local_rank) + " asks for another: one process drives one GPU");
  }
  return device;
}

}  // namespace

int use_rank_device(int local_rank, bool may_share) {
  const int device = choose(local_rank, may_share);
  check(cudaSetDevice(device), "cudaSetDevice(" + std::to_string(device) + ")");
  return device;
}

int use_rank_device() {
  const int known = g_device.load();
  if (known >= 0) {
    check(cudaSetDevice(known), "cudaSetDevice(" + std::to_string(known) + ")");
    return known;
  }
  return use_rank_device(parse_local_rank(std::getenv("LOCAL_RANK")),
                         ranks_may_share_gpu(std::getenv("DSX_COMM_BACKEND")));
}

int chosen_device() { return g_device.load(); }

int use_chosen_device() {
  const int device = g_device.load();
  if (device >= 0) check(cudaSetDevice(device), "cudaSetDevice(" + std::to_string(device) + ")");
  return device;
}

}  // namespace dsx::kernels::cuda
