// GPT-2 trained with LoRA: the base GPT2Cpu runs on frozen weights, with LoRA branches beside the
// projections the config targets (transformers' Conv1D modules c_attn, attn.c_proj, mlp.c_fc,
// mlp.c_proj; PEFT's fan_in_fan_out, as PEFT sets it for them). dsx holds GPT-2's weights as
// (out, in), so the branch is the Llama family's; only the names and the saved config differ.
// To the engine its parameters are the adapters only. Not here: bias training and
// modules_to_save (refused), and partitioning the base at ZeRO stage 3 (each rank holds it whole).
#pragma once

#include <memory>

#include "models/gpt2/gpt2_cpu.h"
#include "models/lora/lora_adapters.h"
#include "models/lora/lora_model.h"

namespace dsx::models {

class LoraGpt2 final : public LoraModel {
 public:
  // `frozen` reads the base weights in gpt2_param_specs(config)'s order.
  LoraGpt2(const GPT2Config& config, const LoraConfig& lora, int max_batch, int max_seq, bool activation_checkpointing,
           std::unique_ptr<ParamAccess> frozen);

  const std::vector<ParamSpec>& params() const override { return adapters_.specs(); }
  size_t num_params() const override { return adapters_.numel(); }
  int num_layers() const override { return base_.num_layers(); }
  kernels::DType param_dtype() const override { return kernels::DType::F32; }
  bool on_device() const override { return false; }
  void init_params(void* flat, uint64_t seed) const override;  // PEFT's initialisation
  void init_adapters(float* flat, uint64_t seed) const override { init_params(flat, seed); }
  float forward(const int32_t* inputs, const int32_t* targets, int B, int T, ParamAccess& access) override;
  void backward(ParamAccess& access, GradSink& sink, float grad_scale) override;
  std::vector<float> logits() const override { return base_.logits(); }
  int vocab_size() const override { return base_.vocab_size(); }
  int max_seq_len() const override { return base_.max_seq_len(); }
  size_t activation_bytes() const override { return base_.activation_bytes() + adapters_.activation_bytes(); }
  size_t frozen_bytes() const override { return frozen_->held_bytes(); }
  double forward_flops(int64_t B, int64_t T) const override;

  const LoraConfig& lora() const override { return adapters_.config(); }
  // The base's products (not the adapters') with bf16 operands.
  void set_bf16_gemms(bool on) { base_.set_bf16_gemms(on); }
  const std::vector<ParamSpec>& base_params() const override { return base_.params(); }
  ParamAccess& frozen() override { return *frozen_; }
  const ParamAccess& frozen() const override { return *frozen_; }
  size_t base_numel() const override { return base_.num_params(); }
  void resume_dropout_after(uint64_t micro_steps) override {
    adapters_.resume_dropout_after(micro_steps);
  }

 private:
  GPT2Cpu<float> base_;
  LoraAdapters adapters_;
  std::unique_ptr<ParamAccess> frozen_;
};

}  // namespace dsx::models
