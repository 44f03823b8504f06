// DeviceBridge on CUDA (see device_bridge.h). Built only with CUDA.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "dsx/error.h"
#include "engine/device_bridge.h"
#include "kernels/cuda/device.h"
#include "kernels/cuda/mixed_precision.h"
#include "kernels/reduce.h"

namespace dsx::engine {
namespace {

using kernels::DType;

void check(cudaError_t status, const char* what) {
  if (status != cudaSuccess) {
    throw Error(status == cudaErrorMemoryAllocation ? ErrorKind::OutOfMemory : ErrorKind::Internal,
                std::string("GPU ") + what + ": " + cudaGetErrorString(status));
  }
}

// One allocation, freed however the constructor that made it ends.
struct DeviceMemory {
  void* p = nullptr;
  DeviceMemory(size_t bytes, const char* what) { check(cudaMalloc(&p, bytes), what); }
  ~DeviceMemory() { cudaFree(p); }
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;
};

struct PinnedMemory {
  void* p = nullptr;
  PinnedMemory(size_t bytes, const char* what) { check(cudaMallocHost(&p, bytes), what); }
  ~PinnedMemory() { cudaFreeHost(p); }
  PinnedMemory(const PinnedMemory&) = delete;
  PinnedMemory& operator=(const PinnedMemory&) = delete;
};

// Makes this rank's GPU current before the members after it allocate anything.
struct RankDevice {
  RankDevice() { kernels::cuda::use_rank_device(); }
};

struct Stream {
  cudaStream_t s = nullptr;
  Stream() { check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "stream"); }
  ~Stream() {
    cudaStreamSynchronize(s);
    cudaStreamDestroy(s);
  }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
};

size_t largest_layer(const models::Model& model) {
  std::vector<size_t> per_layer(static_cast<size_t>(model.num_layers()));
  for (const auto& spec : model.params()) per_layer.at(static_cast<size_t>(spec.layer)) += spec.numel;
  return per_layer.empty() ? 0 : *std::max_element(per_layer.begin(), per_layer.end());
}

class CudaDeviceBridge final : public DeviceBridge {
 public:
  CudaDeviceBridge(const models::Model& model, models::ParamAccess& host_params, models::GradSink& host_grads)
      : host_params_(host_params), host_grads_(host_grads), specs_(model.params()), dtype_(model.param_dtype()),
        esize_(kernels::dtype_size(dtype_)), numel_(model.num_params()),
        params_(numel_ * esize_, "parameter copy (cudaMalloc)"), grads_(numel_ * esize_, "gradients (cudaMalloc)"),
        scratch_(largest_layer(model) * sizeof(float), "staging (cudaMalloc)"),
        pinned_(largest_layer(model) * sizeof(float), "pinned staging (cudaMallocHost)") {
    if (!model.on_device()) throw Error(ErrorKind::Internal, "DeviceBridge: the model is not on the GPU");
    layers_.resize(static_cast<size_t>(model.num_layers()));
    for (size_t i = 0; i < specs_.size(); ++i) layers_.at(static_cast<size_t>(specs_[i].layer)).push_back(i);
    fresh_.assign(layers_.size(), false);
    bytes_ = 2 * numel_ * esize_ + largest_layer(model) * sizeof(float);
  }

  void acquire(int layer) override {
    const auto l = static_cast<size_t>(layer);
    if (fresh_.at(l)) return;  // the device copy is current: ZeRO need not gather it
    kernels::cuda::use_rank_device();  // on whichever thread calls: the current device is per thread
    host_params_.acquire(layer);
    // Pack the layer's fp32 parameters into pinned memory, one copy up, then place (and cast) each.
    size_t at = 0;
    for (size_t i : layers_[l]) {
      std::memcpy(staging() + at, host_params_.param(i), specs_[i].numel * sizeof(float));
      at += specs_[i].numel;
    }
    host_params_.release(layer);
    float* up = dtype_ == DType::F32 ? nullptr : device_staging();
    if (up) check(cudaMemcpyAsync(up, staging(), at * sizeof(float), cudaMemcpyHostToDevice, stream_.s), "copy up");
    at = 0;
    for (size_t i : layers_[l]) {
      void* dst = device_param(i);
      if (up) {
        kernels::cuda::cast(DType::F32, up + at, dtype_, dst, specs_[i].numel, stream_.s);
      } else {
        check(cudaMemcpyAsync(dst, staging() + at, specs_[i].numel * sizeof(float), cudaMemcpyHostToDevice, stream_.s),
              "copy up");
      }
      at += specs_[i].numel;
    }
    check(cudaStreamSynchronize(stream_.s), "parameter refresh");
    fresh_[l] = true;
  }

  const void* param(size_t index) override { return device_param(index); }
  void release(int) override {}

  void* grad(size_t index) override {
    return static_cast<char*>(grads_.p) + specs_.at(index).offset * kernels::dtype_size(dtype_);
  }

  void ready(int layer) override {
    kernels::cuda::use_rank_device();
    const auto l = static_cast<size_t>(layer);
    size_t at = 0;
    for (size_t i : layers_.at(l)) {
      const size_t n = specs_[i].numel;
      if (dtype_ == DType::F32) {
        check(cudaMemcpyAsync(staging() + at, grad(i), n * sizeof(float), cudaMemcpyDeviceToHost, stream_.s), "copy down");
      } else {
        kernels::cuda::cast(dtype_, grad(i), DType::F32, device_staging() + at, n, stream_.s);
      }
      at += n;
    }
    if (dtype_ != DType::F32) {
      check(cudaMemcpyAsync(staging(), device_staging(), at * sizeof(float), cudaMemcpyDeviceToHost, stream_.s), "copy down");
    }
    check(cudaStreamSynchronize(stream_.s), "gradient copy");
    at = 0;
    for (size_t i : layers_[l]) {
      kernels::reduce_into(DType::F32, kernels::ReduceOp::Sum, host_grads_.grad(i), staging() + at, specs_[i].numel);
      at += specs_[i].numel;
    }
    host_grads_.ready(layer);
  }

  void begin_micro_step() override {
    kernels::cuda::use_rank_device();
    check(cudaMemsetAsync(grads_.p, 0, numel_ * esize_, stream_.s), "zero gradients");
    check(cudaStreamSynchronize(stream_.s), "zero gradients");
  }

  void params_changed() override { std::fill(fresh_.begin(), fresh_.end(), false); }
  size_t device_bytes() const override { return bytes_; }

 private:
  float* staging() { return static_cast<float*>(pinned_.p); }
  float* device_staging() { return static_cast<float*>(scratch_.p); }
  void* device_param(size_t index) {
    return static_cast<char*>(params_.p) + specs_.at(index).offset * kernels::dtype_size(dtype_);
  }

  models::ParamAccess& host_params_;
  models::GradSink& host_grads_;
  const std::vector<models::ParamSpec>& specs_;
  DType dtype_;
  std::vector<std::vector<size_t>> layers_;  // parameter indices of each layer
  std::vector<bool> fresh_;                  // the layer's device copy matches the master weights
  size_t esize_, numel_;
  RankDevice device_;  // before every CUDA member
  Stream stream_;
  DeviceMemory params_, grads_;
  DeviceMemory scratch_;  // device fp32, the largest layer
  PinnedMemory pinned_;   // host pinned fp32, the largest layer
  size_t bytes_ = 0;
};

}  // namespace

std::unique_ptr<DeviceBridge> make_cuda_device_bridge(const models::Model& model, models::ParamAccess& host_params,
                                                      models::GradSink& host_grads) {
  return std::make_unique<CudaDeviceBridge>(model, host_params, host_grads);
}

}  // namespace dsx::engine
