// See cuda_stream.h.
#include "models/cuda_stream.h"

#include <string>

#include "dsx/error.h"
#include "kernels/cuda/device.h"

namespace dsx::models {

RankDevice::RankDevice() { kernels::cuda::use_rank_device(); }

ModelStream::ModelStream(cudaStream_t given) : s_(given) {
  if (s_) return;
  const cudaError_t e = cudaStreamCreate(&s_);
  if (e != cudaSuccess) {
    throw Error(ErrorKind::Internal, std::string("a CUDA model's stream: cudaStreamCreate: ") + cudaGetErrorString(e) +
                                         "; check that a GPU is visible");
  }
  owned_ = true;
}

ModelStream::~ModelStream() {
  if (s_ && owned_) {
    cudaStreamSynchronize(s_);
    cudaStreamDestroy(s_);
  }
}

}  // namespace dsx::models
