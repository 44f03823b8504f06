// GPT-2 on the CPU: pre-LayerNorm decoder blocks, GELU (tanh), learned positions, output head tied
// to the token embedding, one layer at a time through ParamAccess / GradSink (models/model.h).
// T = float is the training model; T = double is the reference the gradient checks run against.
// With activation checkpointing only each block's input is kept in forward; backward recomputes
// the block's activations into one scratch set just before its backward.
#pragma once

#include <cstdint>
#include <vector>

#include "models/gpt2/block_tensors.h"
#include "models/gpt2/config.h"
#include "models/gpt2/flops.h"
#include "models/decoder_model.h"
#include "models/projection_adapters.h"

namespace dsx::models {

template <class T>
class GPT2Cpu final : public DecoderModel<GPT2Config, gpt2_forward_flops> {
 public:
  // Activations are allocated for up to max_batch rows of max_seq tokens (max_seq <= maxT).
  GPT2Cpu(const GPT2Config& config, int max_batch, int max_seq, bool activation_checkpointing = false);

  kernels::DType param_dtype() const override { return cpu_param_dtype<T>("GPT-2"); }
  bool on_device() const override { return false; }
  void init_params(void* flat, uint64_t seed) const override;
  float forward(const int32_t* inputs, const int32_t* targets, int B, int Tn,
                ParamAccess& access) override;
  void backward(ParamAccess& access, GradSink& sink, float grad_scale) override;
  std::vector<float> logits() const override;
  size_t activation_bytes() const override;

  // Mean loss of the last forward in the model's own precision (the double reference needs it).
  T mean_loss() const { return mean_loss_; }
  // ds_config bf16 on CPU ranks: the matmuls, the attention's products and the classifier take
  // bf16 operands and sum in fp32 (kernels/cpu/bf16_matmul.h, bf16_attention.h); parameters and
  // everything else stay T. Ignored for T = double.
  void set_bf16_gemms(bool on) { bf16_gemms_ = on; }
  // Adapters beside the block projections (LoRA), or null; not owned. The float model only.
  void set_adapters(Gpt2ProjectionAdapters* adapters);

 private:
  struct BlockActs {
    std::vector<T> ln1, ln1_mean, ln1_rstd, qkv, att, atty, res2, ln2, ln2_mean, ln2_rstd, fch,
        fch_gelu;
  };
  using BlockParams = GPT2BlockTensors<const T*>;
  using BlockGrads = GPT2BlockTensors<T*>;
  BlockActs& acts_of(int block) { return checkpointing_ ? blocks_[0] : blocks_[block]; }
  void block_forward(int block, BlockActs& a, T* res_out, const T* res_in, const BlockParams& p);
  void block_backward(int block, T* dres, BlockActs& a, const T* res_in, const BlockParams& p,
                      const BlockGrads& g);
  // The adapters' share of projection p (nothing without adapters).
  void adapt_forward(int block, Gpt2Projection p, T* out, const T* inp);
  void adapt_backward(int block, Gpt2Projection p, T* dinp, const T* dout, const T* inp);

  bool bf16_gemms_ = false;
  Gpt2ProjectionAdapters* adapters_ = nullptr;
  T mean_loss_ = 0;
  std::vector<int32_t> inputs_, targets_;
  std::vector<std::vector<T>> residual_;  // L + 1 streams: block l's input; [L] the last output
  std::vector<BlockActs> blocks_;         // L sets, or 1 scratch set with checkpointing
  std::vector<T> lnf_, lnf_mean_, lnf_rstd_, logits_, lse_, losses_;
  // Backward scratch, reused by every block.
  std::vector<T> tmp_, dres_, dln_, dqkv_, datty_, dfch_;
};

extern template class GPT2Cpu<float>;
extern template class GPT2Cpu<double>;

}  // namespace dsx::models
