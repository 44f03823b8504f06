// What every CUDA model is built on, before any other CUDA member: the rank's GPU made current,
// its cuda device (device/device.h: the model's memory, copies and waits go through it), and the
// stream it computes on (the caller's - the compute stream of the device ZeRO keeps its state on
// - or one the cuda device makes for the model and drains when it goes). Built only with CUDA
// (DSX_HAVE_CUDA).
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
  device::Device& device() const { return *gpu_; }
  device::Stream& stream() const { return *stream_; }

 private:
  std::unique_ptr<device::Device> gpu_;
  std::unique_ptr<device::Stream> stream_;  // ours (drained and destroyed before gpu_) or adopted
  cudaStream_t s_ = nullptr;
};

}  // namespace dsx::models
