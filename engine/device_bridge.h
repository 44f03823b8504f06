// Training a CUDA model with the host ZeRO engine, as ZeRO-Offload does: the fp32 master
// parameters, the gradients ZeRO reduces and partitions, and the optimizer state stay in host
// memory, partitioned by the stage; the GPU holds one working copy of the parameters in the
// model's dtype (fp32, bf16 or fp16) and its gradients. The bridge is the model's ParamAccess and
// GradSink: acquire(l) refreshes layer l's device copy from ZeRO once after each optimizer step
// (fp32 through a pinned staging buffer, cast on the GPU); ready(l) brings the layer's gradients
// back (cast to fp32 on the GPU, one copy through the pinned buffer) and adds them to ZeRO's,
// which then reduces them as it does a CPU model's. The GPU model synchronises its stream before
// ready(l), so the bridge may read the gradients on its own stream.
#pragma once

#include <cstddef>
#include <memory>

#include "models/model.h"

namespace dsx::engine {

class DeviceBridge : public models::ParamAccess, public models::GradSink {
 public:
  // Before each micro-step's forward: the device gradients start from zero (ZeRO accumulates).
  virtual void begin_micro_step() = 0;
  // The master parameters changed (an optimizer step, a checkpoint load): every layer's device
  // copy is refreshed at its next acquire.
  virtual void params_changed() = 0;
  virtual size_t device_bytes() const = 0;  // parameters, gradients and staging on the GPU
};

// `model` must be on the device; `host_params`/`host_grads` are ZeRO's (fp32, host). Throws
// dsx::Error(Unsupported) in a build without CUDA.
std::unique_ptr<DeviceBridge> make_device_bridge(const models::Model& model, models::ParamAccess& host_params,
                                                 models::GradSink& host_grads);

}  // namespace dsx::engine
