// DeviceBridge on CUDA (see device_bridge.h): the model's parameter copy and gradients in device
// memory, staged through pinned host memory on a stream of its own - all of it the cuda device's
// (device/cuda_device.h). Built only with CUDA.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <string>
#include <vector>

#include "device/cuda_device.h"
#include "device/owned_memory.h"
#include "dsx/error.h"
#include "engine/device_bridge.h"
#include "kernels/reduce.h"

namespace dsx::engine {
namespace {

using device::OwnedMemory;
using kernels::DType;

// How long a copy between the host and the GPU may take before it is reported as hung.
constexpr std::chrono::minutes kCopyTimeout{5};

size_t largest_layer(const models::Model& model) {
  std::vector<size_t> per_layer(static_cast<size_t>(model.num_layers()));
  for (const auto& spec : model.params()) per_layer.at(static_cast<size_t>(spec.layer)) += spec.numel;
  return per_layer.empty() ? 0 : *std::max_element(per_layer.begin(), per_layer.end());
}

class CudaDeviceBridge final : public DeviceBridge {
 public:
  CudaDeviceBridge(const models::Model& model, models::ParamAccess& host_params, models::GradSink& host_grads)
      : host_params_(host_params), host_grads_(host_grads), specs_(model.params()), dtype_(model.param_dtype()),
        esize_(kernels::dtype_size(dtype_)), numel_(model.num_params()), gpu_(device::make_cuda_device()),
        stream_(gpu_->create_stream("device bridge")),
        params_(*gpu_, OwnedMemory::Kind::Device, numel_ * esize_),
        grads_(*gpu_, OwnedMemory::Kind::Device, numel_ * esize_),
        scratch_(*gpu_, OwnedMemory::Kind::Device, largest_layer(model) * sizeof(float)),
        pinned_(*gpu_, OwnedMemory::Kind::Pinned, largest_layer(model) * sizeof(float)) {
    if (!model.on_device()) throw Error(ErrorKind::Internal, "DeviceBridge: the model is not on the GPU");
    layers_.resize(static_cast<size_t>(model.num_layers()));
    for (size_t i = 0; i < specs_.size(); ++i) layers_.at(static_cast<size_t>(specs_[i].layer)).push_back(i);
    fresh_.assign(layers_.size(), false);
    bytes_ = 2 * numel_ * esize_ + largest_layer(model) * sizeof(float);
  }

  void acquire(int layer) override {
    const auto l = static_cast<size_t>(layer);
    if (fresh_.at(l)) return;  // the device copy is current: ZeRO need not gather it
    gpu_->make_current();  // on whichever thread calls: the current device is per thread
    host_params_.acquire(layer);
    // Pack the layer's fp32 parameters into pinned memory, one copy up, then place (and cast) each.
    size_t at = 0;
    for (size_t i : layers_[l]) {
      std::memcpy(staging() + at, host_params_.param(i), specs_[i].numel * sizeof(float));
      at += specs_[i].numel;
    }
    host_params_.release(layer);
    float* up = dtype_ == DType::F32 ? nullptr : device_staging();
    if (up) gpu_->copy(up, staging(), at * sizeof(float), *stream_);
    at = 0;
    for (size_t i : layers_[l]) {
      void* dst = device_param(i);
      if (up) {
        gpu_->cast(DType::F32, up + at, dtype_, dst, specs_[i].numel, *stream_);
      } else {
        gpu_->copy(dst, staging() + at, specs_[i].numel * sizeof(float), *stream_);
      }
      at += specs_[i].numel;
    }
    stream_->synchronize(kCopyTimeout);  // the parameter refresh
    fresh_[l] = true;
  }

  const void* param(size_t index) override { return device_param(index); }
  void release(int) override {}

  void* grad(size_t index) override {
    return grads_.as<char>() + specs_.at(index).offset * kernels::dtype_size(dtype_);
  }

  void ready(int layer) override {
    gpu_->make_current();
    const auto l = static_cast<size_t>(layer);
    size_t at = 0;
    for (size_t i : layers_.at(l)) {
      const size_t n = specs_[i].numel;
      if (dtype_ == DType::F32) {
        gpu_->copy(staging() + at, grad(i), n * sizeof(float), *stream_);
      } else {
        gpu_->cast(dtype_, grad(i), DType::F32, device_staging() + at, n, *stream_);
      }
      at += n;
    }
    if (dtype_ != DType::F32) {
      gpu_->copy(staging(), device_staging(), at * sizeof(float), *stream_);
    }
    stream_->synchronize(kCopyTimeout);  // the gradients' copy down
    at = 0;
    for (size_t i : layers_[l]) {
      kernels::reduce_into(DType::F32, kernels::ReduceOp::Sum, host_grads_.grad(i), staging() + at, specs_[i].numel);
      at += specs_[i].numel;
    }
    host_grads_.ready(layer);
  }

  void begin_micro_step() override {
    gpu_->make_current();
    gpu_->fill_zero(grads_.get(), numel_ * esize_, *stream_);
    stream_->synchronize(kCopyTimeout);
  }

  void params_changed() override { std::fill(fresh_.begin(), fresh_.end(), false); }
  size_t device_bytes() const override { return bytes_; }

 private:
  float* staging() { return pinned_.as<float>(); }
  float* device_staging() { return scratch_.as<float>(); }
  void* device_param(size_t index) {
    return params_.as<char>() + specs_.at(index).offset * kernels::dtype_size(dtype_);
  }

  models::ParamAccess& host_params_;
  models::GradSink& host_grads_;
  const std::vector<models::ParamSpec>& specs_;
  DType dtype_;
  std::vector<std::vector<size_t>> layers_;  // parameter indices of each layer
  std::vector<bool> fresh_;                  // the layer's device copy matches the master weights
  size_t esize_, numel_;
  std::unique_ptr<device::Device> gpu_;  // the rank's GPU, made current: before every GPU member
  std::unique_ptr<device::Stream> stream_;
  OwnedMemory params_, grads_;
  OwnedMemory scratch_;  // device fp32, the largest layer
  OwnedMemory pinned_;   // host pinned fp32, the largest layer
  size_t bytes_ = 0;
};

}  // namespace

std::unique_ptr<DeviceBridge> make_cuda_device_bridge(const models::Model& model, models::ParamAccess& host_params,
                                                      models::GradSink& host_grads) {
  return std::make_unique<CudaDeviceBridge>(model, host_params, host_grads);
}

}  // namespace dsx::engine
