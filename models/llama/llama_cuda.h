// A Llama-family decoder on one GPU: the same model, layer protocol, parameter list and
// activation checkpointing as LlamaCpu (models/llama/llama_cpu.h), with the CUDA layers of
// kernels/cuda/llama_layers.h and GPT-2's cuBLASLt matmuls (DecoderBlas) on one stream. T is the
// storage type of parameters, activations and gradients (float, __nv_bfloat16 or __half);
// arithmetic is fp32. ParamAccess/GradSink hand out device pointers. Memory, copies and waits go
// through device::Device (ModelStream's), as do the kernels' workspaces. Built only with CUDA.
//
// Attention runs one of two ways, chosen once per (batch, sequence) shape:
//   own:   GPT-2's attention kernels on q, k, v packed with the kv heads repeated, as the CPU
//          model does (fp32 softmax probabilities kept, O(T^2) memory per layer);
//   cudnn: cuDNN's fused flash attention (kernels/cuda/cudnn_attention.h) on the rotated q and k
//          in the projections' layout, keeping only fp32 log-sum-exp stats. 16-bit models only,
//          where CudnnAttention::supported says yes, and only in builds with
//          DSX_HAVE_CUDNN_ATTENTION.
// DSX_ATTENTION=own forces the own kernels, =cudnn refuses (Error Unsupported) a shape cuDNN
// cannot run, unset or =auto picks cuDNN where it can.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "kernels/cuda/decoder_layers.h"
#include "models/gpt2/gpt2_cuda.h"  // storage_dtype, init_params_as
#include "models/llama/block_tensors.h"
#include "models/llama/config.h"
#include "models/llama/flops.h"
#include "models/cuda_stream.h"
#include "models/cuda_workspaces.h"
#include "models/decoder_model.h"
#include "models/device_buffer.h"
#include "models/model.h"
#include "models/projection_adapters.h"

namespace dsx::kernels::cuda {
class CudnnAttention;
}

namespace dsx::models {

enum class LlamaAttention { Own, Cudnn };

template <class T>
class LlamaCuda final : public DecoderModel<LlamaConfig, llama_forward_flops> {
 public:
  // `stream`: where the model enqueues its work (the compute stream of the device ZeRO keeps its
  // state on); null: a stream of the model's own. Throws Error(Config) for an invalid config.
  LlamaCuda(const LlamaConfig& config, int max_batch, int max_seq,
            bool activation_checkpointing = false, cudaStream_t stream = nullptr);
  ~LlamaCuda() override;

  kernels::DType param_dtype() const override { return storage_dtype<T>(); }
  bool on_device() const override { return true; }
  // LlamaCpu's initialisation, written as fp32 values or 16-bit bit patterns (host memory).
  void init_params(void* flat, uint64_t seed) const override;
  float forward(const int32_t* inputs, const int32_t* targets, int B, int Tn,
                ParamAccess& access) override;
  void backward(ParamAccess& access, GradSink& sink, float grad_scale) override;
  bool keep_loss_on_device(bool keep) override {
    keep_loss_ = keep;
    return true;
  }
  const float* device_loss() const override { return loss_.data(); }
  std::vector<float> logits() const override;
  size_t activation_bytes() const override;  // device bytes allocated so far

  cudaStream_t stream() const { return stream_.get(); }
  // Adapters beside the block projections (LoRA, models/lora/lora_cuda.h), or null; not owned.
  void set_adapters(DeviceProjectionAdapters<T>* adapters) { adapters_ = adapters; }
  // A base whose block projections it multiplies itself (QLoRA's NF4), or null; not owned. Such
  // a projection's weight pointer is null and its weight takes no gradient.
  void set_quantized_base(DeviceQuantizedProjections<T>* base) { quantized_ = base; }
  const kernels::cuda::DecoderBlas& blas() const { return blas_; }
  // The attention a forward of B rows of Tn tokens runs (chosen on first ask, then kept).
  LlamaAttention attention_for(int B, int Tn);

 private:
  using BlockParams = LlamaBlockTensors<const T*>;
  using BlockGrads = LlamaBlockTensors<T*>;
  struct BlockActs {
    DeviceBuffer<T> xn1, atty, res2, xn2, gate, up, h;
    DeviceBuffer<float> rstd1, rstd2;
    DeviceBuffer<T> qkv;        // own attention: packed q, k, v (repeated kv heads)
    DeviceBuffer<float> att;    // own attention: softmax probabilities (B, NH, T, T)
    DeviceBuffer<T> q, k, v;    // cuDNN: rotated q and k, v
    DeviceBuffer<float> stats;  // cuDNN: log-sum-exp (B, NH, T)
  };

  BlockActs& acts_of(int block) { return checkpointing_ ? blocks_[0] : blocks_[block]; }
  template <class E>
  DeviceBuffer<E> device_array(size_t n) {
    return DeviceBuffer<E>(stream_.device(), n);
  }
  void allocate_for(LlamaAttention path);  // the path's buffers, once
  void attention_forward(BlockActs& a);
  void block_forward(BlockActs& a, T* res_out, const T* res_in, const BlockParams& p);
  void attention_backward(T* dxn, const T* dres2, BlockActs& a, const BlockParams& p,
                          const BlockGrads& g);
  void block_backward(T* dres, BlockActs& a, const T* res_in, const BlockParams& p,
                      const BlockGrads& g);
  void head_backward(ParamAccess& access, GradSink& sink, float grad_scale);
  void embedding_backward(GradSink& sink);
  void project_forward(Projection p, T* out, const T* inp, const T* w, const T* b, size_t N, int in,
                       int out_dim, cudaStream_t s);
  void project_backward(Projection p, T* dinp, T* dw, T* db, const T* dout, const T* inp,
                        const T* w, size_t N, int in, int out_dim, cudaStream_t s);
  // The adapters' share of projection p of block block_ (nothing without adapters).
  void adapt_forward(Projection p, T* out, const T* inp);
  void adapt_backward(Projection p, T* dinp, const T* dout, const T* inp);

  LlamaBlockLayout layout_;
  int forced_ = 0;     // DSX_ATTENTION: 0 auto, 1 own, 2 cudnn
  RankDevice device_;  // before every CUDA member
  ModelStream stream_;
  device::OwnedMemory blas_workspace_;  // before blas_, which works in it
  kernels::cuda::DecoderBlas blas_;
  StreamWorkspace cudnn_workspace_;  // grown on the model's stream, before cudnn_
  // Made on first use, after the stream. A plain function as deleter: builds without cuDNN
  // attention never make one and so never need its destructor.
  std::unique_ptr<kernels::cuda::CudnnAttention, void (*)(kernels::cuda::CudnnAttention*)> cudnn_{
      nullptr, nullptr};
  std::map<std::pair<int, int>, LlamaAttention> chosen_;
  bool own_allocated_ = false, cudnn_allocated_ = false;

  LlamaAttention path_ = LlamaAttention::Own;  // the last forward's
  bool keep_loss_ = false;  // Model::keep_loss_on_device
  // The batch's tokens, their rows grouped by token (for the embedding backward) and the count
  // of targets that count, all made on the GPU from the tokens copied up: the host never walks
  // the B*T tokens.
  DeviceBuffer<int32_t> inputs_, targets_, grouped_rows_, group_scratch_, counted_on_device_;
  DeviceBuffer<float> cos_, sin_;  // (max_seq, D/2) rotary tables
  std::vector<DeviceBuffer<T>> residual_;
  std::vector<BlockActs> blocks_;
  DeviceBuffer<T> xf_, logits_, q_, k_, v_, tmp_, dres_, dxn_, datty_, dh_, dup_, dqkv_;
  DeviceBuffer<float> rstdf_, lse_, losses_, dpre_, norm_scratch_, loss_;
  DeviceProjectionAdapters<T>* adapters_ = nullptr;
  DeviceQuantizedProjections<T>* quantized_ = nullptr;
  int block_ = 0;  // the block being run, for the adapters
};

extern template class LlamaCuda<float>;
extern template class LlamaCuda<__nv_bfloat16>;
extern template class LlamaCuda<__half>;

}  // namespace dsx::models
