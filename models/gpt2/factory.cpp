// GPT-2 construction by device and dtype (see factory.h).
#include "models/gpt2/factory.h"

#include "models/build_model.h"
#include "models/gpt2/gpt2_cpu.h"
#include "device/cuda_device.h"
#ifdef DSX_HAVE_CUDA
#include "models/gpt2/gpt2_cuda.h"
#endif

namespace dsx::models {

std::unique_ptr<Model> make_gpt2(const GPT2Config& config, const GPT2Options& o) {
#ifdef DSX_HAVE_CUDA
  if (o.cuda) return make_cuda_model<GPT2Cuda>(config, o);
#endif
  return make_cpu_model<GPT2Cpu>("GPT-2", config, o);
}

int cuda_device_count() { return device::cuda_device_count(); }

void choose_rank_gpu(int local_rank, bool may_share) {
#ifdef DSX_HAVE_CUDA
  device::use_rank_device(local_rank, may_share);
#else
  (void)local_rank, (void)may_share;
#endif
}

}  // namespace dsx::models
