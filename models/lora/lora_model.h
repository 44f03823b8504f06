// What the engine and the tools ask of a model trained with LoRA, on whichever device it computes:
// a Model whose parameters are what trains (the adapters, and any base tensors trained in full),
// over a frozen base it reads through a ParamAccess. LoraLlama and LoraGpt2 (CPU) and
// LoraLlamaCuda (GPU, models/lora/lora_llama_cuda.h) are the ones there are.
#pragma once

#include <cstdint>
#include <vector>

#include "models/lora/lora_config.h"
#include "models/model.h"

namespace dsx::models {

class LoraModel : public Model {
 public:
  virtual const LoraConfig& lora() const = 0;
  // PEFT's initialisation of the adapters, in fp32 whatever the model computes in (the engine
  // takes fp32 initial weights).
  virtual void init_adapters(float* flat, uint64_t seed) const = 0;
  virtual const std::vector<ParamSpec>& base_params() const = 0;
  virtual ParamAccess& frozen() = 0;
  virtual const ParamAccess& frozen() const = 0;
  // Elements of the frozen base model (all its parameters).
  virtual size_t base_numel() const = 0;
  // Dropout's masks are drawn per training forward: after a resume they continue from the
  // `micro_steps` the checkpoint counted, as the uninterrupted run's do.
  virtual void resume_dropout_after(uint64_t micro_steps) = 0;
};

}  // namespace dsx::models
