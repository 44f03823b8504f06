// A seam inside a decoder block: extra trainable paths beside its frozen linear projections
// (LoRA, models/lora/). The Llama models call forward() right after each projection's own matmul
// and backward() right after the projection's input gradient is computed, with the same input,
// so an adapter never needs the projection's weight (dense or quantised alike). The CPU model
// takes ProjectionAdapters, the CUDA model DeviceProjectionAdapters<T>; GPT-2 has its own pair
// (Gpt2ProjectionAdapters, DeviceGpt2ProjectionAdapters<T>).
#pragma once

#include <cstddef>

namespace dsx::models {

// The linear projections of a Llama-family block, in Hugging Face's module order.
enum class Projection { q, k, v, o, gate, up, down };
inline constexpr int kNumProjections = 7;

// Hugging Face's module path of a projection within a block: "self_attn.q_proj", "mlp.up_proj".
inline const char* projection_module(Projection p) {
  constexpr const char* kModules[kNumProjections] = {"self_attn.q_proj", "self_attn.k_proj",
                                                     "self_attn.v_proj", "self_attn.o_proj",
                                                     "mlp.gate_proj",    "mlp.up_proj",
                                                     "mlp.down_proj"};
  return kModules[static_cast<int>(p)];
}

// A frozen base whose block projections are not dense fp32 matrices (QLoRA's NF4): the CPU Llama
// hands such a projection's product to it instead of multiplying by the weight pointer, which is
// null for it. The bias, if any, stays dense and is added by the model.
class QuantizedProjections {
 public:
  virtual ~QuantizedProjections() = default;
  virtual bool quantized(int block, Projection p) const = 0;
  // out (N, out_features) = inp (N, in_features) W^T.
  virtual void forward(int block, Projection p, float* out, const float* inp, size_t N) = 0;
  // dinp (N, in_features) = dout (N, out_features) W; no weight gradient (frozen).
  virtual void backward_input(int block, Projection p, float* dinp, const float* dout, size_t N) = 0;
};

// GPT-2's linear layers (transformers' Conv1D modules) in block order, and their module paths.
enum class Gpt2Projection { c_attn, attn_proj, c_fc, mlp_proj };
inline constexpr int kNumGpt2Projections = 4;

inline const char* gpt2_projection_module(Gpt2Projection p) {
  constexpr const char* kModules[kNumGpt2Projections] = {"attn.c_attn", "attn.c_proj", "mlp.c_fc", "mlp.c_proj"};
  return kModules[static_cast<int>(p)];
}

// The same seam for GPT-2's blocks (GPT2Cpu): called after each projection's own matmul, and
// after its input gradient, with the projection's input.
class Gpt2ProjectionAdapters {
 public:
  virtual ~Gpt2ProjectionAdapters() = default;
  virtual void forward(int block, Gpt2Projection p, float* out, const float* inp, size_t N) = 0;
  virtual void backward(int block, Gpt2Projection p, float* dinp, const float* dout, const float* inp,
                        size_t N) = 0;
};

class ProjectionAdapters {
 public:
  virtual ~ProjectionAdapters() = default;
  // out (N, out_features) += the adapter's output for input inp (N, in_features).
  virtual void forward(int block, Projection p, float* out, const float* inp, size_t N) = 0;
  // dinp (N, in_features) += the adapter's input gradient; its own gradients accumulate too.
  virtual void backward(int block, Projection p, float* dinp, const float* dout, const float* inp,
                        size_t N) = 0;
};

// The same seam on a GPU: pointers are device memory in the model's storage type T, and the
// adapters enqueue their work on the model's stream (handed to them when they are built).
template <class T>
class DeviceProjectionAdapters {
 public:
  virtual ~DeviceProjectionAdapters() = default;
  virtual void forward(int block, Projection p, T* out, const T* inp, size_t N) = 0;
  virtual void backward(int block, Projection p, T* dinp, const T* dout, const T* inp, size_t N) = 0;
};

// QuantizedProjections on a GPU (QLoRA on the CUDA Llama): device pointers in the model's storage
// type T, work enqueued on the model's stream (handed over when built). The model skips its
// cuBLASLt product and the weight gradient of such a projection.
template <class T>
class DeviceQuantizedProjections {
 public:
  virtual ~DeviceQuantizedProjections() = default;
  virtual bool quantized(int block, Projection p) const = 0;
  // out (N, out_features) = inp (N, in_features) W^T + bias (the projection's dense bias, or null).
  virtual void forward(int block, Projection p, T* out, const T* inp, const T* bias, size_t N) = 0;
  // dinp (N, in_features) = dout (N, out_features) W.
  virtual void backward_input(int block, Projection p, T* dinp, const T* dout, size_t N) = 0;
};

// GPT-2's seam (Gpt2ProjectionAdapters) on a GPU, for GPT2Cuda: device pointers in T, work
// enqueued on the model's stream.
template <class T>
class DeviceGpt2ProjectionAdapters {
 public:
  virtual ~DeviceGpt2ProjectionAdapters() = default;
  virtual void forward(int block, Gpt2Projection p, T* out, const T* inp, size_t N) = 0;
  virtual void backward(int block, Gpt2Projection p, T* dinp, const T* dout, const T* inp,
                        size_t N) = 0;
};

}  // namespace dsx::models
