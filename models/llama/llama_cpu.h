// A Llama-family decoder (Llama 2/3, Mistral without its sliding window, Qwen2) on the CPU:
// RMSNorm, rotary positions (Hugging Face's rotate_half layout, rope_scaling applied), causal
// grouped-query attention, SwiGLU MLP, a tied or untied head, one layer at a time through
// ParamAccess / GradSink (models/model.h) in the flat order of models/llama/config.h.
// T = float is the training model; T = double is the reference the gradient checks run against.
// With activation checkpointing only each block's input is kept in forward; backward recomputes
// the block's activations into one scratch set just before its backward (as GPT2Cpu does).
// Not here: a sliding-window mask, padding masks (every row attends to its own positions
// 0..T-1), an MLP bias, and 16-bit parameters.
#pragma once

#include <cstdint>
#include <vector>

#include "models/llama/block_tensors.h"
#include "models/llama/config.h"
#include "models/llama/flops.h"
#include "models/decoder_model.h"
#include "models/projection_adapters.h"

namespace dsx::models {

template <class T>
class LlamaCpu final : public DecoderModel<LlamaConfig, llama_forward_flops> {
 public:
  // Activations are allocated for up to max_batch rows of max_seq tokens
  // (max_seq <= max_position_embeddings). Throws Error(Config) for an invalid config.
  LlamaCpu(const LlamaConfig& config, int max_batch, int max_seq, bool activation_checkpointing = false);

  kernels::DType param_dtype() const override { return cpu_param_dtype<T>("Llama"); }
  bool on_device() const override { return false; }
  // N(0, 0.02) for the embedding, every projection and the head, ones for the norms, zeros for
  // biases (transformers' _init_weights with initializer_range 0.02).
  void init_params(void* flat, uint64_t seed) const override;
  float forward(const int32_t* inputs, const int32_t* targets, int B, int Tn,
                ParamAccess& access) override;
  void backward(ParamAccess& access, GradSink& sink, float grad_scale) override;
  std::vector<float> logits() const override;
  size_t activation_bytes() const override;

  // Adapters beside the block projections (LoRA), or null; not owned. The float model only.
  void set_adapters(ProjectionAdapters* adapters);
  // A quantised frozen base (QLoRA) computing the projections it holds, or null; not owned.
  void set_quantized_base(QuantizedProjections* base);

  // Mean loss of the last forward in the model's own precision (the double reference needs it).
  T mean_loss() const { return mean_loss_; }
  // ds_config bf16 on CPU ranks: the dense projections and the head take bf16 operands and sum in
  // fp32 (kernels/cpu/bf16_matmul.h), as GPT2Cpu does; a quantised base and adapters are
  // unchanged. Ignored for T = double.
  void set_bf16_gemms(bool on) { bf16_gemms_ = on; }

 private:
  using BlockParams = LlamaBlockTensors<const T*>;
  using BlockGrads = LlamaBlockTensors<T*>;
  struct BlockActs {
    std::vector<T> xn1, rstd1, qkv, att, atty, res2, xn2, rstd2, gate, up, h;
  };
  BlockActs& acts_of(int block) { return checkpointing_ ? blocks_[0] : blocks_[block]; }
  void block_forward(int block, BlockActs& a, T* res_out, const T* res_in, const BlockParams& p);
  void block_backward(int block, T* dres, BlockActs& a, const T* res_in, const BlockParams& p,
                      const BlockGrads& g);
  void attention_backward(int block, T* dxn, const T* dres2, BlockActs& a, const BlockParams& p,
                          const BlockGrads& g);
  // The adapters' share of projection p (nothing without adapters).
  void adapt_forward(int block, Projection p, T* out, const T* inp);
  void adapt_backward(int block, Projection p, T* dinp, const T* dout, const T* inp);
  // Projection p's own product (dense matmul, or the quantised base's), then the adapters'.
  void project_forward(int block, Projection p, T* out, const T* inp, const T* w, const T* b, int in, int out_dim);
  void project_backward(int block, Projection p, T* dinp, T* dw, T* db, const T* dout, const T* inp, const T* w,
                        int in, int out_dim);
  void head_backward(ParamAccess& access, GradSink& sink, float grad_scale);

  LlamaBlockLayout layout_;
  bool bf16_gemms_ = false;
  ProjectionAdapters* adapters_ = nullptr;
  QuantizedProjections* quantized_ = nullptr;
  T mean_loss_ = 0;
  std::vector<int32_t> inputs_, targets_;
  std::vector<T> cos_, sin_;              // (max_seq, D/2) rotary tables
  std::vector<std::vector<T>> residual_;  // L + 1 streams: block l's input; [L] the last output
  std::vector<BlockActs> blocks_;         // L sets, or 1 scratch set with checkpointing
  std::vector<T> xf_, rstdf_, logits_, lse_, losses_;
  // Scratch reused by every block: the raw projections in forward, their gradients in backward.
  std::vector<T> q_, k_, v_, tmp_, dres_, dxn_, datty_, dqkv_, dh_, dup_;
};

extern template class LlamaCpu<float>;
extern template class LlamaCpu<double>;

}  // namespace dsx::models
