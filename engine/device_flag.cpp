// --device (see device_flag.h).
#include "engine/device_flag.h"

#include "dsx/error.h"
#include "models/gpt2/factory.h"

namespace dsx::engine {

bool wants_cuda(const std::string& device, const models::ModelShape& shape) {
  if (device == "cpu") return false;
  if (device != "cuda" && device != "auto") {
    throw Error(ErrorKind::Usage, "--device must be auto, cpu or cuda, not '" + device + "'");
  }
  const bool visible = models::cuda_device_count() > 0;
  if (device == "cuda" && !visible) {
    throw Error(ErrorKind::Unsupported, "--device cuda: no GPU is visible to this process (a CUDA build of dsx, a "
                                        "driver and CUDA_VISIBLE_DEVICES naming a GPU are needed)");
  }
  // auto: a family without CUDA kernels yet trains on the CPU rather than stopping.
  return visible && (device == "cuda" || models::has_cuda_kernels(shape));
}

}  // namespace dsx::engine
