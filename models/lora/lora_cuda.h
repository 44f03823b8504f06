// The LoRA adapters of a Llama-family or GPT-2 model on the GPU: the branches of LoraAdapters
// (models/lora/lora_adapters.h: which projections, their tensors, PEFT's names and init) run
// beside LlamaCuda's (or GPT2Cuda's) projections with the kernels of kernels/cuda/lora_linear.h,
// on the model's stream, with the same dropout mask as the CPU adapters (kernels/lora_math.h). The
// A/B tensors and their gradients are wherever the engine keeps parameters (device memory); the
// branch's activations live here, allocated through the device layer. Built only with CUDA.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <vector>

#include "device/device.h"
#include "device/owned_memory.h"
#include "kernels/cuda/decoder_layers.h"
#include "models/cuda_workspaces.h"
#include "models/lora/lora_adapters.h"
#include "models/model.h"
#include "models/projection_adapters.h"

namespace dsx::models {

template <class T>
class LoraAdaptersCuda final : public DeviceProjectionAdapters<T>,
                               public DeviceGpt2ProjectionAdapters<T> {
 public:
  // `layout` (kept by reference) says where the adapters are; buffers for up to max_batch rows
  // of max_seq tokens on `gpu`; work on `stream`.
  LoraAdaptersCuda(const LoraAdapters& layout, device::Device& gpu, cudaStream_t stream,
                   int max_batch, int max_seq);

  // The next forward/backward find the tensors here; `training` turns dropout on (a new mask
  // per training forward, the same one for its backward and for a recompute).
  void bind(ParamAccess* access, GradSink* sink, bool training);
  // As LoraAdapters::resume_dropout_after.
  void resume_dropout_after(uint64_t training_forwards) { forward_count_ = training_forwards; }

  void forward(int block, Projection p, T* out, const T* inp, size_t N) override;
  void backward(int block, Projection p, T* dinp, const T* dout, const T* inp, size_t N) override;
  // GPT-2's projections are the layout's slots by number, as on the CPU (the same masks).
  void forward(int block, Gpt2Projection p, T* out, const T* inp, size_t N) override {
    forward(block, Projection(static_cast<int>(p)), out, inp, N);
  }
  void backward(int block, Gpt2Projection p, T* dinp, const T* dout, const T* inp,
                size_t N) override {
    backward(block, Projection(static_cast<int>(p)), dinp, dout, inp, N);
  }
  size_t activation_bytes() const;

 private:
  T* u_of(const LoraAdapters::Site& s) const { return u_[s.a_index / 2].template as<T>(); }
  // The branch's input: inp itself, or inp with dropout's mask applied into xdrop_.
  const T* dropped(int block, Projection p, const T* inp, size_t N, int in);

  const LoraAdapters& layout_;
  cudaStream_t stream_;
  device::OwnedMemory blas_workspace_;  // before blas_, which works in it (no biases: cuBLASLt's)
  kernels::cuda::DecoderBlas blas_;
  std::vector<device::OwnedMemory> u_;  // x @ A^T of the last forward, (N, r), per adapter
  device::OwnedMemory du_, xdrop_, dx_;
  ParamAccess* access_ = nullptr;
  GradSink* sink_ = nullptr;
  bool dropout_on_ = false;
  uint64_t forward_count_ = 0;  // as LoraAdapters counts, so the masks are the CPU's
};

extern template class LoraAdaptersCuda<float>;
extern template class LoraAdaptersCuda<__nv_bfloat16>;
extern template class LoraAdaptersCuda<__half>;

}  // namespace dsx::models
