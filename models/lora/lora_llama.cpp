// LoraLlama (see lora_llama.h): the base model runs on the frozen weights and the engine's
// adapters together (models/lora/frozen_with_adapters.h). A base tensor that trains in full is
// read from, and its gradient sent to, the engine instead.
#include "models/lora/lora_llama.h"

#include <algorithm>

#include "dsx/error.h"
#include "models/lora/frozen_with_adapters.h"

namespace dsx::models {

TrainedBaseTensors lora_llama_trained_base(const LlamaConfig& config, const LoraAdapters& adapters) {
  return select_trained_base_tensors(
      llama_param_specs(config), adapters.config(), [&](const std::string& m) { return adapters.adapts(m); },
      config.tie_word_embeddings, adapters.numel());
}

LoraLlama::LoraLlama(const LlamaConfig& config, const LoraConfig& lora, int max_batch, int max_seq,
                     bool activation_checkpointing, std::unique_ptr<ParamAccess> frozen)
    : base_(config, max_batch, max_seq, activation_checkpointing),
      adapters_(config, lora, max_batch, max_seq),
      frozen_(std::move(frozen)),
      trained_(lora_llama_trained_base(config, adapters_)) {
  LoraParamList list = lora_param_list(adapters_.specs(), trained_, base_.params().size());
  specs_ = std::move(list.specs);
  numel_ = list.numel;
  trained_of_base_ = std::move(list.trained_of_base);
  trained_initial_ = read_trained_initial();
  base_.set_adapters(&adapters_);
  // QLoRA: the NF4 base multiplies its own projections (models/lora/nf4_frozen_weights.h).
  if (auto* quantized = dynamic_cast<QuantizedProjections*>(frozen_.get())) base_.set_quantized_base(quantized);
}

// Layer by layer in ascending order, as every rank does (a stage-3 base gathers in acquire).
std::vector<float> LoraLlama::read_trained_initial() {
  std::vector<float> values(numel_ - adapters_.numel());
  const auto& base_specs = base_.params();
  for (size_t i = 0; i < trained_.specs.size();) {
    const int layer = base_specs[trained_.base_index[i]].layer;
    frozen_->acquire(layer);
    for (; i < trained_.specs.size() && base_specs[trained_.base_index[i]].layer == layer; ++i) {
      const auto* from = static_cast<const float*>(frozen_->param(trained_.base_index[i]));
      if (!from)
        throw Error(ErrorKind::Unsupported, "LoRA: " + base_specs[trained_.base_index[i]].name +
                                                " is held quantised, so it cannot train in full; remove it from "
                                                "modules_to_save");
      std::copy(from, from + trained_.specs[i].numel, values.begin() + (trained_.specs[i].offset - adapters_.numel()));
    }
    frozen_->release(layer);
  }
  return values;
}

void LoraLlama::init_params(void* flat, uint64_t seed) const {
  auto* out = static_cast<float*>(flat);
  adapters_.init(out, seed);
  std::copy(trained_initial_.begin(), trained_initial_.end(), out + adapters_.numel());
}

// The model computes in fp32: its initial weights are the engine's.
void LoraLlama::init_adapters(float* flat, uint64_t seed) const { init_params(flat, seed); }

float LoraLlama::forward(const int32_t* inputs, const int32_t* targets, int B, int T, ParamAccess& access) {
  adapters_.bind(&access, nullptr, targets != nullptr);
  FrozenWithAdapters both(*frozen_, access, trained_of_base_);
  return base_.forward(inputs, targets, B, T, both);
}

void LoraLlama::backward(ParamAccess& access, GradSink& sink, float grad_scale) {
  adapters_.bind(&access, &sink, true);
  FrozenWithAdapters both(*frozen_, access, trained_of_base_);
  NoFrozenGrads frozen_sink(sink, trained_of_base_);
  base_.backward(both, frozen_sink, grad_scale);
}

size_t LoraLlama::activation_bytes() const { return base_.activation_bytes() + adapters_.activation_bytes(); }

double LoraLlama::forward_flops(int64_t B, int64_t T) const {
  return base_.forward_flops(B, T) + adapters_.flops(B * T);
}

}  // namespace dsx::models
