// See cuda_model_legacy.h: what llama_cuda.cpp and the GPT-2 benchmark still use, moved out of
// gpt2_cuda.cpp unchanged when GPT-2 went through device::Device.
#include "models/cuda_model_legacy.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <functional>
#include <string>
#include <vector>

#include "dsx/error.h"
#include "kernels/cuda/mixed_precision.h"
#include "models/gpt2/gpt2_cuda.h"
#include "models/gpt2/gpu_layer_span.h"

namespace dsx::models {

namespace {

void cuda_check(cudaError_t e, const char* what) {
  if (e != cudaSuccess)
    throw Error(ErrorKind::Internal, std::string("CUDA model: ") + what + ": " + cudaGetErrorString(e) +
                                         "; check that a GPU is visible and has enough free memory");
}

void CUDART_CB run_host_function(void* data) {
  std::unique_ptr<std::function<void()>> fn(static_cast<std::function<void()>*>(data));
  (*fn)();
}

}  // namespace

GpuLayerSpan::GpuLayerSpan(cudaStream_t stream, const char* what, int layer) {
  if (!trace::recording()) return;
  int device = 0;
  cudaGetDevice(&device);
  enqueue_ = [stream](std::function<void()> fn) {
    auto task = std::make_unique<std::function<void()>>(std::move(fn));
    if (cudaLaunchHostFunc(stream, &run_host_function, task.get()) != cudaSuccess) return false;
    task.release();  // run_host_function owns it now
    return true;
  };
  open("cuda:" + std::to_string(device), what, layer);
}

template <class T>
DeviceArray<T>::DeviceArray(size_t n) : size_(n) {
  if (n) cuda_check(cudaMalloc(reinterpret_cast<void**>(&data_), n * sizeof(T)), "cudaMalloc");
}

template <class T>
DeviceArray<T>::~DeviceArray() {
  if (data_) cudaFree(data_);
}

template <class T>
DeviceArray<T>& DeviceArray<T>::operator=(DeviceArray&& o) noexcept {
  if (this != &o) {
    if (data_) cudaFree(data_);
    data_ = o.data_, size_ = o.size_;
    o.data_ = nullptr, o.size_ = 0;
  }
  return *this;
}

// Copies on `stream` and waits for it: a cudaMemcpy on the legacy stream may return before its
// data lands, and the model's non-blocking streams would not wait for it.
template <class T>
void upload_as(T* device, const float* host, size_t n, cudaStream_t stream) {
  std::vector<uint16_t> bits;
  const void* src = host;
  if constexpr (sizeof(T) != 4) {
    bits.resize(n);
    for (size_t i = 0; i < n; ++i) bits[i] = bits_of<T>(host[i]);
    src = bits.data();
  }
  cuda_check(cudaMemcpyAsync(device, src, n * sizeof(T), cudaMemcpyHostToDevice, stream), "upload");
  cuda_check(cudaStreamSynchronize(stream), "upload");
}

template <class T>
void download_as(float* host, const T* device, size_t n, cudaStream_t stream) {
  if constexpr (sizeof(T) == 4) {
    cuda_check(cudaMemcpyAsync(host, device, n * 4, cudaMemcpyDeviceToHost, stream), "download");
    cuda_check(cudaStreamSynchronize(stream), "download");
  } else {
    std::vector<uint16_t> bits(n);
    cuda_check(cudaMemcpyAsync(bits.data(), device, n * 2, cudaMemcpyDeviceToHost, stream), "download");
    cuda_check(cudaStreamSynchronize(stream), "download");
    for (size_t i = 0; i < n; ++i) host[i] = value_of<T>(bits[i]);
  }
}

float host_mean_loss(const float* device_losses, const int32_t* host_targets, size_t rows, cudaStream_t stream,
                     size_t& counted) {
  std::vector<float> losses(rows);
  cuda_check(cudaMemcpyAsync(losses.data(), device_losses, rows * 4, cudaMemcpyDeviceToHost, stream), "copy losses");
  cuda_check(cudaStreamSynchronize(stream), "forward");
  double sum = 0;
  counted = 0;
  for (size_t i = 0; i < rows; ++i) {
    sum += losses[i];
    counted += host_targets[i] >= 0;
  }
  return counted ? static_cast<float>(sum / counted) : 0.0f;
}

void device_mean_loss(float* out, const float* device_losses, const int32_t* host_targets, size_t rows,
                      cudaStream_t stream, size_t& counted) {
  counted = 0;
  for (size_t i = 0; i < rows; ++i) counted += host_targets[i] >= 0;
  // The rows as `rows` blocks of one element: one sum, in row order, as the CPU model's.
  const float factor = counted ? 1.0f / static_cast<float>(counted) : 0.0f;
  kernels::cuda::sum_blocks(kernels::DType::F32, device_losses, rows, 1, factor, kernels::DType::F32, out, 1, false,
                            stream);
}

template class DeviceArray<float>;
template class DeviceArray<int32_t>;
template class DeviceArray<__nv_bfloat16>;
template class DeviceArray<__half>;
template void upload_as<float>(float*, const float*, size_t, cudaStream_t);
template void upload_as<__nv_bfloat16>(__nv_bfloat16*, const float*, size_t, cudaStream_t);
template void upload_as<__half>(__half*, const float*, size_t, cudaStream_t);
template void download_as<float>(float*, const float*, size_t, cudaStream_t);
template void download_as<__nv_bfloat16>(float*, const __nv_bfloat16*, size_t, cudaStream_t);
template void download_as<__half>(float*, const __half*, size_t, cudaStream_t);

}  // namespace dsx::models
