// See cuda_stream.h.
#include "models/cuda_stream.h"

#include "device/cuda_device.h"

namespace dsx::models {

RankDevice::RankDevice() { device::use_rank_device(); }

ModelStream::ModelStream(cudaStream_t given) : s_(given) {
  if (s_) return;
  gpu_ = device::make_cuda_device();
  own_ = gpu_->create_stream("model");
  s_ = static_cast<cudaStream_t>(own_->native());
}

}  // namespace dsx::models
