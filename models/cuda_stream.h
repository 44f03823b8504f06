// What every CUDA model is built on, before any other CUDA member: the rank's GPU made current,
// and the stream it computes on (the caller's - the compute stream of the device ZeRO keeps its
// state on - or one made and destroyed here). Built only with CUDA (DSX_HAVE_CUDA).
#pragma once

#include <cuda_runtime_api.h>

namespace dsx::models {

struct RankDevice {
  RankDevice();  // makes LOCAL_RANK's GPU current (kernels/cuda/device.h)
};

class ModelStream {
 public:
  explicit ModelStream(cudaStream_t given);  // null: a stream of the model's own
  ~ModelStream();                            // an own stream is drained, then destroyed
  ModelStream(const ModelStream&) = delete;
  ModelStream& operator=(const ModelStream&) = delete;
  cudaStream_t get() const { return s_; }

 private:
  cudaStream_t s_ = nullptr;
  bool owned_ = false;
};

}  // namespace dsx::models
