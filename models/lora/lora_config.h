// What a LoRA run adapts and how: PEFT's LoraConfig (r, lora_alpha, lora_dropout, target_modules,
// bias, use_rslora, modules_to_save, init_lora_weights), read from PEFT's own adapter_config.json
// or from dsx's short flag form "r=8,alpha=16,targets=q_proj,v_proj", and written back as an
// adapter_config.json that PEFT's PeftModel.from_pretrained loads. Keys mean what they mean in
// PEFT (ref: PEFT v0.20.0 tuners/lora/config.py). Not here: which modules a given model has
// (models/lora/lora_targets.h) and the adapter tensors themselves.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace dsx::models {

enum class LoraInit { kaiming, gaussian, random };  // init_lora_weights true | "gaussian" | false

struct LoraConfig {
  int r = 8;
  double alpha = 8;  // lora_alpha
  double dropout = 0;
  bool use_rslora = false;
  LoraInit init = LoraInit::kaiming;
  // target_modules: names (a module matches when its path equals one or ends with "." + one), a
  // regular expression matched against the whole path, or "all-linear"; none of them: PEFT's
  // default for the architecture (q_proj and v_proj for the Llama family).
  std::vector<std::string> target_names;
  std::optional<std::string> target_regex;
  bool all_linear = false;
  bool fan_in_fan_out = false;  // the base stores weights (in, out): GPT-2's Conv1D, where PEFT forces it on
  std::string bias = "none";                 // none | all | lora_only
  std::vector<std::string> modules_to_save;  // trained in full beside the adapters
  std::string source;                        // where it was read from, for messages

  // alpha / r, or alpha / sqrt(r) with use_rslora.
  double scaling() const;
  // Whether the module at `path` (e.g. "model.layers.0.self_attn.q_proj") gets an adapter;
  // `default_targets` stands in when the config names none.
  bool targets(const std::string& path, const std::vector<std::string>& default_targets) const;
};

// PEFT's adapter_config.json. Error(Config) naming the file and key for a wrong type or value,
// an unknown key, a non-LORA peft_type, or a PEFT option dsx does not implement.
LoraConfig read_peft_adapter_config(const std::string& path);
LoraConfig parse_peft_adapter_config(const std::string& json_text, const std::string& source);

// The --lora flag: a path to an adapter_config.json (or a folder holding one), or key=value
// pairs separated by commas: r, alpha, dropout, targets (a list: the items after it without '='
// belong to it, "all-linear", or a regex in /slashes/), modules_to_save (a list as targets),
// rslora, init, bias.
LoraConfig parse_lora_flag(const std::string& text);

// adapter_config.json for PEFT, base_model_name_or_path set to `base_model` (may be "").
std::string peft_adapter_config_json(const LoraConfig& config, const std::string& base_model);

}  // namespace dsx::models
