// LoraLlama (see lora_llama.h): the base model runs on the frozen weights and the engine's
// adapters together (models/lora/frozen_with_adapters.h).
#include "models/lora/lora_llama.h"

#include "models/lora/frozen_with_adapters.h"

namespace dsx::models {

LoraLlama::LoraLlama(const LlamaConfig& config, const LoraConfig& lora, int max_batch, int max_seq,
                     bool activation_checkpointing, std::unique_ptr<ParamAccess> frozen)
    : base_(config, max_batch, max_seq, activation_checkpointing),
      adapters_(config, lora, max_batch, max_seq),
      frozen_(std::move(frozen)) {
  base_.set_adapters(&adapters_);
  // QLoRA: the NF4 base multiplies its own projections (models/lora/nf4_frozen_weights.h).
  if (auto* quantized = dynamic_cast<QuantizedProjections*>(frozen_.get())) base_.set_quantized_base(quantized);
}

void LoraLlama::init_params(void* flat, uint64_t seed) const { adapters_.init(static_cast<float*>(flat), seed); }

void LoraLlama::init_adapters(float* flat, uint64_t seed) const { adapters_.init(flat, seed); }

float LoraLlama::forward(const int32_t* inputs, const int32_t* targets, int B, int T, ParamAccess& access) {
  adapters_.bind(&access, nullptr, targets != nullptr);
  FrozenWithAdapters both(*frozen_, access);
  return base_.forward(inputs, targets, B, T, both);
}

void LoraLlama::backward(ParamAccess& access, GradSink& sink, float grad_scale) {
  adapters_.bind(&access, &sink, true);
  FrozenWithAdapters both(*frozen_, access);
  NoFrozenGrads frozen_sink(sink);
  base_.backward(both, frozen_sink, grad_scale);
}

size_t LoraLlama::activation_bytes() const { return base_.activation_bytes() + adapters_.activation_bytes(); }

double LoraLlama::forward_flops(int64_t B, int64_t T) const {
  return base_.forward_flops(B, T) + adapters_.flops(B * T);
}

}  // namespace dsx::models
