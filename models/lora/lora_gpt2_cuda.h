// GPT-2 trained with LoRA on one GPU: LoraGpt2's design (lora_gpt2.h) on GPT2Cuda, as
// LoraLlamaCuda is LoraLlama's. The base's weights are copied to the GPU once, in the model's
// storage type, and held there frozen (every rank whole: ZeRO stages 0-2); the adapters
// (lora_cuda.h, PEFT's Conv1D targets c_attn, attn.c_proj, mlp.c_fc, mlp.c_proj) run beside the
// targeted projections with the CPU's dropout masks. To the engine it is a Model on the device
// whose parameters are the adapters only; the base's weight-gradient products are skipped.
// Built only with CUDA.
#pragma once

#include <cuda_runtime_api.h>

#include <memory>
#include <vector>

#include "device/device.h"
#include "models/gpt2/gpt2_cuda.h"
#include "models/lora/lora_adapters.h"
#include "models/lora/lora_cuda.h"
#include "models/lora/lora_model.h"

namespace dsx::models {

template <class T>
class LoraGpt2Cuda final : public LoraModel {
 public:
  // `base`: the base model's fp32 weights in gpt2_param_specs(config)'s order (rounded to T on
  // the way). `stream`: as GPT2Cuda's (null: a stream of the model's own).
  LoraGpt2Cuda(const GPT2Config& config, const LoraConfig& lora, int max_batch, int max_seq,
               bool activation_checkpointing, const std::vector<float>& base,
               cudaStream_t stream = nullptr);
  ~LoraGpt2Cuda() override;  // waits for the stream before the buffers go

  const std::vector<ParamSpec>& params() const override { return layout_.specs(); }
  size_t num_params() const override { return layout_.numel(); }
  int num_layers() const override { return base_.num_layers(); }
  kernels::DType param_dtype() const override { return base_.param_dtype(); }
  bool on_device() const override { return true; }
  // PEFT's initialisation in T's storage format (host memory).
  void init_params(void* flat, uint64_t seed) const override;
  void init_adapters(float* flat, uint64_t seed) const override { layout_.init(flat, seed); }
  float forward(const int32_t* inputs, const int32_t* targets, int B, int T_,
                ParamAccess& access) override;
  void backward(ParamAccess& access, GradSink& sink, float grad_scale) override;
  bool keep_loss_on_device(bool keep) override { return base_.keep_loss_on_device(keep); }
  const float* device_loss() const override { return base_.device_loss(); }
  std::vector<float> logits() const override { return base_.logits(); }
  int vocab_size() const override { return base_.vocab_size(); }
  int max_seq_len() const override { return base_.max_seq_len(); }
  size_t activation_bytes() const override {
    return base_.activation_bytes() + adapters_.activation_bytes();
  }
  size_t frozen_bytes() const override { return frozen_->held_bytes(); }
  double forward_flops(int64_t B, int64_t T_) const override;

  const LoraConfig& lora() const override { return layout_.config(); }
  const std::vector<ParamSpec>& base_params() const override { return base_.params(); }
  ParamAccess& frozen() override { return *frozen_; }
  const ParamAccess& frozen() const override { return *frozen_; }
  size_t base_numel() const override { return base_.num_params(); }
  void resume_dropout_after(uint64_t micro_steps) override {
    adapters_.resume_dropout_after(micro_steps);
  }
  cudaStream_t stream() const { return base_.stream(); }

 private:
  GPT2Cuda<T> base_;                     // first: the rank's GPU current, the stream
  std::unique_ptr<device::Device> gpu_;  // where the frozen base and the branches' buffers live
  std::unique_ptr<device::Stream> stream_view_;  // base_'s stream, to wait for it
  LoraAdapters layout_;  // which projections, PEFT's names and init; no buffers
  std::unique_ptr<ParamAccess> frozen_;
  LoraAdaptersCuda<T> adapters_;
};

extern template class LoraGpt2Cuda<float>;
extern template class LoraGpt2Cuda<__nv_bfloat16>;
extern template class LoraGpt2Cuda<__half>;

}  // namespace dsx::models
