// A Llama-family model trained with LoRA on one GPU: LoraLlama's design (lora_llama.h) on
// LlamaCuda. The base's weights are copied to the GPU once, in the model's storage type, and
// held there frozen, whole on every rank, or read through a ParamAccess given (ZeRO stage 3's
// partitioned base, engine/device_partitioned_frozen_weights.h); the adapters (lora_cuda.h) run
// beside the targeted projections. To the engine it is a Model on the device whose parameters are
// the adapters, then the base tensors PEFT's modules_to_save and bias train in full
// (trained_base_tensors.h, in LoraLlama's order), so ZeRO keeps, reduces and steps those and
// nothing else. Built only with CUDA.
#pragma once

#include <cuda_runtime_api.h>

#include <functional>
#include <memory>
#include <vector>

#include "device/device.h"
#include "models/llama/llama_cuda.h"
#include "models/lora/lora_adapters.h"
#include "models/lora/lora_cuda.h"
#include "models/lora/lora_model.h"
#include "models/lora/trained_base_tensors.h"

namespace dsx::models {

template <class T>
class LoraLlamaCuda final : public LoraModel {
 public:
  // `base`: the base model's fp32 weights in llama_param_specs(config)'s order (rounded to T on
  // the way). `stream`: as LlamaCuda's (null: a stream of the model's own). `frozen`: where the
  // layers read the base, in device memory of T on `stream`'s GPU (null: `base` uploaded whole);
  // the tensors trained in full start from `base` either way.
  LoraLlamaCuda(const LlamaConfig& config, const LoraConfig& lora, int max_batch, int max_seq,
                bool activation_checkpointing, const std::vector<float>& base,
                cudaStream_t stream = nullptr, std::unique_ptr<ParamAccess> frozen = nullptr);
  // Any frozen base on the GPU, made by `make_frozen` once the model's stream exists (work on
  // that stream). A base that is also a DeviceQuantizedProjections<T> (QLoRA's NF4 base,
  // nf4_device_weights.h) computes its quantised projections for the model. `base` holds the
  // initial values of the tensors trained in full (empty when none are).
  using FrozenOnGpu =
      std::function<std::unique_ptr<ParamAccess>(device::Device& gpu, cudaStream_t stream)>;
  LoraLlamaCuda(const LlamaConfig& config, const LoraConfig& lora, int max_batch, int max_seq,
                bool activation_checkpointing, const std::vector<float>& base,
                const FrozenOnGpu& make_frozen, cudaStream_t stream = nullptr);
  ~LoraLlamaCuda() override;  // waits for the stream before the buffers go

  const std::vector<ParamSpec>& params() const override { return list_.specs; }
  size_t num_params() const override { return list_.numel; }
  int num_layers() const override { return base_.num_layers(); }
  kernels::DType param_dtype() const override { return base_.param_dtype(); }
  bool on_device() const override { return true; }
  // PEFT's initialisation of the adapters, the tensors trained in full as the base holds them: in
  // T's storage format (host memory), or fp32.
  void init_params(void* flat, uint64_t seed) const override;
  void init_adapters(float* flat, uint64_t seed) const override;
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
  LlamaCuda<T> base_;                    // first: the rank's GPU current, the stream
  std::unique_ptr<device::Device> gpu_;  // where the frozen base and the branches' buffers live
  std::unique_ptr<device::Stream> stream_view_;  // base_'s stream, to wait for it
  LoraAdapters layout_;  // which projections, PEFT's names and init; no buffers
  TrainedBaseTensors trained_;
  LoraParamList list_;                  // the adapters', then trained_'s
  std::vector<float> trained_initial_;  // trained_'s values in the base
  std::unique_ptr<ParamAccess> frozen_;
  LoraAdaptersCuda<T> adapters_;
};

extern template class LoraLlamaCuda<float>;
extern template class LoraLlamaCuda<__nv_bfloat16>;
extern template class LoraLlamaCuda<__half>;

}  // namespace dsx::models
