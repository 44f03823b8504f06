// LoraGpt2 (see lora_gpt2.h): the base GPT-2 reads the frozen weights and the engine's adapters
// through one access, and gets no gradient for any base tensor.
#include "models/lora/lora_gpt2.h"

#include "models/lora/frozen_with_adapters.h"

namespace dsx::models {

LoraGpt2::LoraGpt2(const GPT2Config& config, const LoraConfig& lora, int max_batch, int max_seq,
                   bool activation_checkpointing, std::unique_ptr<ParamAccess> frozen)
    : base_(config, max_batch, max_seq, activation_checkpointing),
      adapters_(config, lora, max_batch, max_seq),
      frozen_(std::move(frozen)) {
  base_.set_adapters(&adapters_);
}

void LoraGpt2::init_params(void* flat, uint64_t seed) const { adapters_.init(static_cast<float*>(flat), seed); }

float LoraGpt2::forward(const int32_t* inputs, const int32_t* targets, int B, int T, ParamAccess& access) {
  adapters_.bind(&access, nullptr, targets != nullptr);
  FrozenWithAdapters both(*frozen_, access);
  return base_.forward(inputs, targets, B, T, both);
}

void LoraGpt2::backward(ParamAccess& access, GradSink& sink, float grad_scale) {
  adapters_.bind(&access, &sink, true);
  FrozenWithAdapters both(*frozen_, access);
  NoFrozenGrads frozen_sink(sink);
  base_.backward(both, frozen_sink, grad_scale);
}

double LoraGpt2::forward_flops(int64_t B, int64_t T) const {
  return base_.forward_flops(B, T) + adapters_.flops(B * T);
}

}  // namespace dsx::models
