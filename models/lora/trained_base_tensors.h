// The base model's own tensors that a LoRA run trains in full beside the adapters, as PEFT
// trains them: every parameter of the modules named in modules_to_save (e.g. lm_head,
// embed_tokens), and the biases that `bias` selects ("all": every bias of the model;
// "lora_only": those of the projections that carry an adapter). Their ParamSpecs carry the names
// PEFT saves them under (less "base_model.model."): a module to save keeps its own name
// ("lm_head.weight"), a bias of an adapted projection sits under its base layer
// ("model.layers.0.self_attn.q_proj.base_layer.bias"), any other bias keeps its name.
// Not here: the gradients (the model routes them) and how the tensors start (from the base).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "models/lora/lora_config.h"
#include "models/model.h"

namespace dsx::models {

struct TrainedBaseTensors {
  std::vector<ParamSpec> specs;     // offsets continue from the first offset given
  std::vector<size_t> base_index;   // specs[i] trains base_specs[base_index[i]]
};

// `adapted(module_path)`: whether that module carries a LoRA adapter. `tied`: the head shares
// the embedding's table. Error(Config) naming the config's source for a modules_to_save entry
// that matches no module, one that is also a LoRA target (PEFT never adapts a module it saves),
// or a saved embedding or head of a model whose head is tied to its embedding.
TrainedBaseTensors select_trained_base_tensors(const std::vector<ParamSpec>& base_specs, const LoraConfig& config,
                                               const std::function<bool(const std::string&)>& adapted, bool tied,
                                               size_t first_offset);

// What a LoRA model hands the engine: the adapters' tensors, then `trained`'s.
struct LoraParamList {
  std::vector<ParamSpec> specs;
  size_t numel = 0;
  std::vector<int> trained_of_base;  // per base tensor: its index in specs, or -1 (frozen)
};
LoraParamList lora_param_list(const std::vector<ParamSpec>& adapter_specs,
                              const TrainedBaseTensors& trained, size_t num_base_tensors);

// The starting values of `trained`'s tensors (in their order, from trained.specs[0].offset on),
// read from the base's whole fp32 weights laid out as `base_specs`.
std::vector<float> trained_initial_values(const TrainedBaseTensors& trained,
                                          const std::vector<ParamSpec>& base_specs,
                                          const std::vector<float>& base);

}  // namespace dsx::models
