// The factory of DeviceBridge: the CUDA implementation where the build has one.
#include "engine/device_bridge.h"

#include "dsx/error.h"

namespace dsx::engine {

#ifdef DSX_HAVE_CUDA
std::unique_ptr<DeviceBridge> make_cuda_device_bridge(const models::Model& model, models::ParamAccess& host_params,
                                                      models::GradSink& host_grads);  // device_bridge_cuda.cpp
#endif

std::unique_ptr<DeviceBridge> make_device_bridge(const models::Model& model, models::ParamAccess& host_params,
                                                 models::GradSink& host_grads) {
#ifdef DSX_HAVE_CUDA
  return make_cuda_device_bridge(model, host_params, host_grads);
#else
  (void)model, (void)host_params, (void)host_grads;
  throw Error(ErrorKind::Unsupported, "a GPU model needs a CUDA build of dsx (cmake -DDSX_CUDA=ON)");
#endif
}

}  // namespace dsx::engine
