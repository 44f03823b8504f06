// See cuda_stream.h.
#include "models/cuda_stream.h"

#include "device/cuda_device.h"

namespace dsx::models {

RankDevice::RankDevice() { device::use_rank_device(); }

ModelStream::ModelStream(cudaStream_t given) : gpu_(device::make_cuda_device()) {
  stream_ = given ? gpu_->adopt_stream(given, "model") : gpu_->create_stream("model");
  s_ = static_cast<cudaStream_t>(stream_->native());
}

}  // namespace dsx::models
