// The CUDA model helpers that call the CUDA runtime themselves, kept only for their last users
// (models/llama/llama_cuda.cpp and bench/models/bench_gpu_gpt2.cpp) until those go through
// device::Device as GPT-2 does (issue 32): delete this file and cuda_model_legacy.cpp with them.
// New code uses models/device_buffer.h and the model's device::Device.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace dsx::models {

// A device allocation of n elements of T, freed on destruction.
template <class T>
class DeviceArray {
 public:
  DeviceArray() = default;
  explicit DeviceArray(size_t n);
  ~DeviceArray();
  DeviceArray(DeviceArray&& o) noexcept : data_(o.data_), size_(o.size_) { o.data_ = nullptr, o.size_ = 0; }
  DeviceArray& operator=(DeviceArray&& o) noexcept;
  DeviceArray(const DeviceArray&) = delete;
  T* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  T* data_ = nullptr;
  size_t size_ = 0;
};

// Host fp32 <-> device T (bf16 rounds to nearest even), on `stream`, waited for.
template <class T>
void upload_as(T* device, const float* host, size_t n, cudaStream_t stream);
template <class T>
void download_as(float* host, const T* device, size_t n, cudaStream_t stream);

// The mean of the rows' losses (on the device, one per row) over the targets that count
// (host_targets >= 0), summed on the host in a fixed order so the reported loss is reproducible;
// `counted` gets how many counted. Waits for the stream.
float host_mean_loss(const float* device_losses, const int32_t* host_targets, size_t rows, cudaStream_t stream,
                     size_t& counted);

// The mean loss left on the device (Model::keep_loss_on_device): *out = the rows' losses summed
// on the stream, times 1 / counted, where `counted` (rows with host_targets >= 0) comes from the
// host's targets. Enqueues only: never waits.
void device_mean_loss(float* out, const float* device_losses, const int32_t* host_targets, size_t rows,
                      cudaStream_t stream, size_t& counted);

// Where a CUDA model keeps its loss when asked to (Model::keep_loss_on_device).
class KeptLoss {
 public:
  KeptLoss() : value_(1) {}
  bool keep(bool on) {
    kept_ = on;
    return true;
  }
  bool kept() const { return kept_; }
  float* data() const { return value_.data(); }

 private:
  bool kept_ = false;
  DeviceArray<float> value_;
};

}  // namespace dsx::models
