// select_trained_base_tensors (see trained_base_tensors.h). A module matches a modules_to_save
// entry as PEFT matches it: its path equals the entry or ends with "." + entry; a parameter
// trains when its module or any module above it matches.
#include "models/lora/trained_base_tensors.h"

#include <algorithm>

#include "dsx/error.h"

namespace dsx::models {

namespace {

bool matches(const std::string& path, const std::string& entry) {
  return path == entry || (path.size() > entry.size() && path.ends_with("." + entry));
}

std::string module_of(const std::string& param_name) { return param_name.substr(0, param_name.rfind('.')); }

// The modules_to_save entry that the parameter's module or one of its ancestors matches, or "".
std::string saved_by(const std::string& param_name, const std::vector<std::string>& entries) {
  for (std::string path = module_of(param_name); !path.empty();
       path = path.find('.') == std::string::npos ? "" : module_of(path))
    for (const auto& e : entries)
      if (matches(path, e)) return e;
  return "";
}

bool bias_trains(const std::string& name, const LoraConfig& config, bool adapted) {
  if (!name.ends_with(".bias")) return false;
  return config.bias == "all" || (config.bias == "lora_only" && adapted);
}

void check_saved_module(const LoraConfig& config, const std::string& entry, const std::string& param_name,
                        bool adapted, bool tied) {
  if (adapted)
    throw Error(ErrorKind::Config, config.source + ": modules_to_save entry '" + entry + "' names " +
                                       module_of(param_name) +
                                       ", which target_modules also adapts; PEFT never adapts a module it trains "
                                       "in full: drop it from one of the two lists");
  if (tied && (param_name.ends_with("embed_tokens.weight") || param_name.ends_with("lm_head.weight")))
    throw Error(ErrorKind::Config, config.source + ": modules_to_save entry '" + entry +
                                       "' trains the embedding, which this model's head shares "
                                       "(tie_word_embeddings); dsx does not train tied tables: remove it");
}

}  // namespace

TrainedBaseTensors select_trained_base_tensors(const std::vector<ParamSpec>& base_specs, const LoraConfig& config,
                                               const std::function<bool(const std::string&)>& adapted, bool tied,
                                               size_t first_offset) {
  TrainedBaseTensors out;
  std::vector<std::string> found;
  size_t offset = first_offset;
  for (size_t i = 0; i < base_specs.size(); ++i) {
    const ParamSpec& base = base_specs[i];
    const bool is_adapted = adapted(module_of(base.name));
    const std::string entry = saved_by(base.name, config.modules_to_save);
    if (!entry.empty()) check_saved_module(config, entry, base.name, is_adapted, tied), found.push_back(entry);
    if (entry.empty() && !bias_trains(base.name, config, is_adapted)) continue;
    ParamSpec spec = base;
    if (is_adapted) spec.name = module_of(base.name) + ".base_layer.bias";  // only biases of adapted modules
    spec.offset = offset;
    offset += spec.numel;
    out.specs.push_back(std::move(spec));
    out.base_index.push_back(i);
  }
  for (const auto& e : config.modules_to_save)
    if (std::find(found.begin(), found.end(), e) == found.end())
      throw Error(ErrorKind::Config, config.source + ": modules_to_save entry '" + e +
                                         "' matches no module of this model (e.g. lm_head, embed_tokens, "
                                         "model.norm)");
  return out;
}

LoraParamList lora_param_list(const std::vector<ParamSpec>& adapter_specs,
                              const TrainedBaseTensors& trained, size_t num_base_tensors) {
  LoraParamList list{adapter_specs, 0, std::vector<int>(num_base_tensors, -1)};
  for (size_t i = 0; i < trained.specs.size(); ++i) {
    list.trained_of_base.at(trained.base_index[i]) = static_cast<int>(list.specs.size());
    list.specs.push_back(trained.specs[i]);
  }
  if (!list.specs.empty()) list.numel = list.specs.back().offset + list.specs.back().numel;
  return list;
}

std::vector<float> trained_initial_values(const TrainedBaseTensors& trained,
                                          const std::vector<ParamSpec>& base_specs,
                                          const std::vector<float>& base) {
  if (trained.specs.empty()) return {};
  const size_t first = trained.specs.front().offset;
  std::vector<float> values(trained.specs.back().offset + trained.specs.back().numel - first);
  for (size_t i = 0; i < trained.specs.size(); ++i) {
    const ParamSpec& from = base_specs.at(trained.base_index[i]);
    if (from.offset + from.numel > base.size())
      throw Error(ErrorKind::Internal, "LoRA: the base weights end before " + from.name);
    std::copy_n(base.begin() + static_cast<std::ptrdiff_t>(from.offset), from.numel,
                values.begin() + static_cast<std::ptrdiff_t>(trained.specs[i].offset - first));
  }
  return values;
}

}  // namespace dsx::models
