// What every CUDA model is built on, before any other CUDA member: the rank's GPU made current,
// and the stream it computes on (the caller's - the compute stream of the device ZeRO keeps its
// state on - or one the cuda device makes for the model and drains when it goes). Built only
// with CUDA (DSX_HAVE_CUDA).
#pragma once

#include <cuda_runtime_api.h>

#include <memory>

#include "device/device.h"

namespace dsx::models {

struct RankDevice {
  RankDevice();  // makes LOCAL_RANK's GPU current (device/cuda_device.h)
};

class ModelStream {
 public:
  explicit ModelStream(cudaStream_t given);  // null: a stream of the model's own
  ModelStream(const ModelStream&) = delete;
  ModelStream& operator=(const ModelStream&) = delete;
  cudaStream_t get() const { return s_; }

 private:
  std::unique_ptr<device::Device> gpu_;  // only for a stream of our own
  std::unique_ptr<device::Stream> own_;  // drained and destroyed before gpu_
  cudaStream_t s_ = nullptr;
};

}  // namespace dsx::models
