// A Llama-family model trained with LoRA: the base model's layers run as they are, on frozen
// weights (models/lora/frozen_weights.h), with LoRA branches beside the targeted projections.
// To the engine it is a Model whose parameters are the adapters, then the base tensors that
// PEFT's modules_to_save and bias train in full (models/lora/trained_base_tensors.h), so ZeRO
// partitions, reduces and steps those and nothing else, at every stage; the layer numbering is
// the base's, so the adapters of block l are gathered and reduced with layer l + 1.
#pragma once

#include <memory>

#include "models/llama/llama_cpu.h"
#include "models/lora/lora_adapters.h"
#include "models/lora/lora_model.h"
#include "models/lora/trained_base_tensors.h"

namespace dsx::models {

// The base tensors a LoRA Llama trains in full, placed after `adapters`' tensors.
TrainedBaseTensors lora_llama_trained_base(const LlamaConfig& config, const LoraAdapters& adapters);

class LoraLlama final : public LoraModel {
 public:
  // `frozen` reads the base weights in llama_param_specs(config)'s order; the tensors trained in
  // full start from its values (read here, layer by layer, on every rank alike).
  LoraLlama(const LlamaConfig& config, const LoraConfig& lora, int max_batch, int max_seq,
            bool activation_checkpointing, std::unique_ptr<ParamAccess> frozen);

  const std::vector<ParamSpec>& params() const override { return specs_; }
  size_t num_params() const override { return numel_; }
  int num_layers() const override { return base_.num_layers(); }
  kernels::DType param_dtype() const override { return kernels::DType::F32; }
  bool on_device() const override { return false; }
  // The adapters as PEFT initialises them, the tensors trained in full as the base holds them.
  void init_params(void* flat, uint64_t seed) const override;
  void init_adapters(float* flat, uint64_t seed) const override;
  float forward(const int32_t* inputs, const int32_t* targets, int B, int T,
                ParamAccess& access) override;
  void backward(ParamAccess& access, GradSink& sink, float grad_scale) override;
  std::vector<float> logits() const override { return base_.logits(); }
  int vocab_size() const override { return base_.vocab_size(); }
  int max_seq_len() const override { return base_.max_seq_len(); }
  size_t activation_bytes() const override;
  size_t frozen_bytes() const override { return frozen_->held_bytes(); }
  double forward_flops(int64_t B, int64_t T) const override;

  const LlamaConfig& base_config() const { return base_.config(); }
  // The base's dense products (not the adapters', nor an NF4 base's) with bf16 operands.
  void set_bf16_gemms(bool on) { base_.set_bf16_gemms(on); }
  const std::vector<ParamSpec>& base_params() const override { return base_.params(); }
  ParamAccess& frozen() override { return *frozen_; }
  const ParamAccess& frozen() const override { return *frozen_; }
  const LoraConfig& lora() const override { return adapters_.config(); }
  size_t base_numel() const override { return base_.num_params(); }
  void resume_dropout_after(uint64_t micro_steps) override {
    adapters_.resume_dropout_after(micro_steps);
  }
  const TrainedBaseTensors& trained_base() const { return trained_; }

 private:
  std::vector<float> read_trained_initial();

  LlamaCpu<float> base_;
  LoraAdapters adapters_;
  std::unique_ptr<ParamAccess> frozen_;
  TrainedBaseTensors trained_;
  std::vector<ParamSpec> specs_;     // the adapters', then trained_'s
  size_t numel_ = 0;
  std::vector<int> trained_of_base_;  // per base tensor: its index in specs_, or -1 (frozen)
  std::vector<float> trained_initial_;
};

}  // namespace dsx::models
