// A LoRA model's dense frozen base on the GPU (LoraLlamaCuda, LoraGpt2Cuda): the base's fp32
// weights uploaded once in the model's storage type T (rounded to nearest even), never written,
// every tensor whole on every rank. Built only with CUDA.
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include "device/device.h"
#include "device/owned_memory.h"
#include "dsx/error.h"
#include "kernels/dtype.h"
#include "models/gpt2/gpt2_cuda.h"  // storage_dtype
#include "models/model.h"

namespace dsx::models {

template <class T>
class DeviceFrozenWeights final : public ParamAccess {
 public:
  // `flat`: the base in `specs`' layout.
  DeviceFrozenWeights(device::Device& gpu, std::vector<ParamSpec> specs,
                      const std::vector<float>& flat)
      : specs_(std::move(specs)) {
    size_t need = 0;
    for (const auto& s : specs_) need = std::max(need, s.offset + s.numel);
    if (flat.size() < need)
      throw Error(ErrorKind::Internal, "frozen base weights: " + std::to_string(flat.size()) +
                                           " elements for a model of " + std::to_string(need));
    constexpr kernels::DType dtype = storage_dtype<T>();
    std::vector<unsigned char> host(need * sizeof(T));
    for (size_t i = 0; i < need; ++i) kernels::store_element<dtype>(host.data(), i, flat[i]);
    memory_ = device::OwnedMemory(gpu, device::OwnedMemory::Kind::Device, host.size());
    gpu.copy_now(memory_.get(), host.data(), host.size());
  }
  void acquire(int) override {}
  void release(int) override {}
  const void* param(size_t index) override { return memory_.as<T>() + specs_.at(index).offset; }
  size_t held_bytes() const override { return memory_.bytes(); }

 private:
  std::vector<ParamSpec> specs_;
  device::OwnedMemory memory_;
};

}  // namespace dsx::models
