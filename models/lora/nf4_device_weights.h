// QLoRA's frozen base on one GPU: the device twin of Nf4FrozenWeights (nf4_frozen_weights.h).
// Each block projection stays NF4 in bitsandbytes' layout (packed codes, two a byte) beside its
// absmax with double quantisation resolved (one fp32 per 64 weights), and the CUDA Llama hands
// it that projection's products (kernels/cuda/nf4.h: each weight dequantised as the product
// reads it, never a dequantised matrix). The rest (embeddings, norms, biases, lm_head) is dense
// in the model's storage type T. Everything is uploaded once, in one allocation through the
// device layer, and never written. Built only with CUDA.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <array>
#include <optional>
#include <vector>

#include "device/device.h"
#include "device/owned_memory.h"
#include "kernels/cuda/nf4.h"
#include "models/lora/nf4_frozen_weights.h"
#include "models/model.h"
#include "models/projection_adapters.h"

namespace dsx::models {

template <class T>
class Nf4DeviceWeights final : public ParamAccess, public DeviceQuantizedProjections<T> {
 public:
  // `base` as validated on the host (it may go once this returns); work on `stream`.
  Nf4DeviceWeights(device::Device& gpu, cudaStream_t stream, Nf4FrozenWeights& base,
                   int num_layers);

  void acquire(int) override {}
  void release(int) override {}
  // Device pointers in T; null for a projection held in NF4.
  const void* param(size_t index) override;
  size_t held_bytes() const override { return memory_.bytes(); }

  bool quantized(int block, Projection p) const override { return weight(block, p) != nullptr; }
  void forward(int block, Projection p, T* out, const T* inp, const T* bias, size_t N) override;
  void backward_input(int block, Projection p, T* dinp, const T* dout, size_t N) override;

  // Of held_bytes(): the NF4 projections (packed codes and resolved absmax) and the dense rest.
  size_t nf4_bytes() const { return held_bytes() - dense_bytes(); }
  size_t dense_bytes() const { return dense_elements_ * sizeof(T); }

 private:
  const kernels::cuda::Nf4DeviceWeight* weight(int block, Projection p) const;  // null: dense
  const kernels::cuda::Nf4DeviceWeight& quantized_weight(int block, Projection p) const;

  cudaStream_t stream_;
  device::OwnedMemory memory_;
  size_t dense_elements_ = 0, dense_at_ = 0;  // the dense part: its elements, its byte offset
  std::vector<std::optional<size_t>> dense_offset_;  // per spec: element offset in T, or NF4
  std::vector<std::array<std::optional<kernels::cuda::Nf4DeviceWeight>, kNumProjections>> by_block_;
};

extern template class Nf4DeviceWeights<float>;
extern template class Nf4DeviceWeights<__nv_bfloat16>;
extern template class Nf4DeviceWeights<__half>;

}  // namespace dsx::models
