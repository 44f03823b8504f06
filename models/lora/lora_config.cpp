// PEFT's adapter_config.json and dsx's --lora flag <-> LoraConfig (see lora_config.h).
#include "models/lora/lora_config.h"

#include <rapidjson/prettywriter.h>
#include <rapidjson/stringbuffer.h>
#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <regex>

#include "dsx/error.h"
#include "dsx/json_input.h"

namespace dsx::models {

namespace {

using Value = rapidjson::Value;

constexpr int kMaxRank = 65536;  // far beyond any model's width: a larger r is a typo

// Keys of PEFT's LoraConfig that dsx honours.
const char* const kKeys[] = {"r", "lora_alpha", "lora_dropout", "target_modules", "bias", "use_rslora",
                             "modules_to_save", "init_lora_weights", "peft_type", "task_type",
                             "fan_in_fan_out"};
// Keys PEFT writes that carry no meaning for training (bookkeeping) and are accepted as they are.
const char* const kBookkeeping[] = {"base_model_name_or_path", "revision", "inference_mode", "auto_mapping",
                                    "peft_version", "megatron_core", "qalora_group_size", "runtime_config"};
// PEFT options dsx does not implement: accepted only at their off value (null, false, {}, []).
const char* const kOffOnly[] = {"layers_to_transform", "layers_pattern", "rank_pattern", "alpha_pattern",
                                "use_dora", "lora_bias", "target_parameters", "layer_replication",
                                "megatron_config", "loftq_config", "eva_config", "corda_config",
                                "trainable_token_indices", "exclude_modules", "use_qalora",
                                "ensure_weight_tying", "arrow_config", "alora_invocation_tokens",
                                "astra_config", "kasa_config", "monteclora_config", "use_bdlora",
                                "velora_config", "lora_ga_config"};

template <size_t N>
bool listed(const char* const (&keys)[N], const std::string& key) {
  return std::any_of(std::begin(keys), std::end(keys), [&](const char* k) { return key == k; });
}

bool is_off(const Value& v) {
  return v.IsNull() || v.IsFalse() || (v.IsObject() && v.MemberCount() == 0) || (v.IsArray() && v.Empty());
}

[[noreturn]] void bad(const std::string& source, const std::string& key, const std::string& what) {
  throw Error(ErrorKind::Config, source + ": key '" + key + "' " + what);
}

std::vector<std::string> string_list(const Value& v, const std::string& source, const char* key) {
  std::vector<std::string> out;
  if (v.IsNull()) return out;
  if (!v.IsArray()) bad(source, key, "must be a list of module names or null");
  for (const auto& item : v.GetArray()) {
    if (!item.IsString() || item.GetStringLength() == 0) bad(source, key, "must hold non-empty strings only");
    out.emplace_back(item.GetString());
  }
  return out;
}

void read_targets(LoraConfig& c, const Value& v, const std::string& source) {
  if (v.IsString()) {
    const std::string s = v.GetString();
    if (s == "all-linear") {
      c.all_linear = true;
      return;
    }
    try {
      std::regex check(s);
    } catch (const std::regex_error& e) {
      bad(source, "target_modules", "is not a valid regular expression ('" + s + "': " + e.what() + ")");
    }
    c.target_regex = s;
    return;
  }
  c.target_names = string_list(v, source, "target_modules");
}

void read_init(LoraConfig& c, const Value& v, const std::string& source) {
  if (v.IsBool()) {
    c.init = v.GetBool() ? LoraInit::kaiming : LoraInit::random;
  } else if (v.IsString() && std::string(v.GetString()) == "gaussian") {
    c.init = LoraInit::gaussian;
  } else {
    bad(source, "init_lora_weights",
        "must be true, false or \"gaussian\"; data-dependent inits (pissa, olora, loftq, eva, corda, ...) are "
        "not implemented in dsx: initialise with PEFT and load the adapter folder instead");
  }
}

void check_bias(const std::string& bias, const std::string& source) {
  if (bias != "none" && bias != "all" && bias != "lora_only")
    bad(source, "bias", "must be \"none\", \"all\" or \"lora_only\", got \"" + bias + "\"");
}

void read_key(LoraConfig& c, const std::string& key, const Value& v, const std::string& source) {
  if (key == "r") {
    if (!v.IsInt() || v.GetInt() <= 0 || v.GetInt() > kMaxRank)
      bad(source, key, "must be a positive integer up to " + std::to_string(kMaxRank));
    c.r = v.GetInt();
  } else if (key == "lora_alpha") {
    if (!v.IsNumber() || !(v.GetDouble() > 0)) bad(source, key, "must be a positive number");
    c.alpha = v.GetDouble();
  } else if (key == "lora_dropout") {
    if (!v.IsNumber() || v.GetDouble() < 0 || v.GetDouble() >= 1) bad(source, key, "must be a number in [0, 1)");
    c.dropout = v.GetDouble();
  } else if (key == "target_modules") {
    read_targets(c, v, source);
  } else if (key == "bias") {
    if (!v.IsString()) bad(source, key, "must be a string");
    c.bias = v.GetString();
    check_bias(c.bias, source);
  } else if (key == "use_rslora" || key == "fan_in_fan_out") {
    if (!v.IsBool()) bad(source, key, "must be true or false");
    if (key == "use_rslora") c.use_rslora = v.GetBool();
    else c.fan_in_fan_out = v.GetBool();  // which model may have it is the adapters' to check
  } else if (key == "modules_to_save") {
    c.modules_to_save = string_list(v, source, "modules_to_save");
  } else if (key == "init_lora_weights") {
    read_init(c, v, source);
  } else if (key == "peft_type") {
    if (!v.IsString() || std::string(v.GetString()) != "LORA")
      bad(source, key, "must be \"LORA\": dsx reads LoRA adapters only");
  } else if (key == "task_type") {
    if (!v.IsNull() && !(v.IsString() && std::string(v.GetString()) == "CAUSAL_LM"))
      bad(source, key, "must be \"CAUSAL_LM\" or null: dsx trains causal language models");
  }
}

}  // namespace

double LoraConfig::scaling() const { return use_rslora ? alpha / std::sqrt(double(r)) : alpha / r; }

bool LoraConfig::targets(const std::string& path, const std::vector<std::string>& default_targets) const {
  if (all_linear) return true;  // the caller offers linear modules other than the head only
  if (target_regex) return std::regex_match(path, std::regex(*target_regex));
  const auto& names = target_names.empty() ? default_targets : target_names;
  return std::any_of(names.begin(), names.end(), [&](const std::string& n) {
    return path == n || (path.size() > n.size() && path.ends_with("." + n));
  });
}

LoraConfig parse_peft_adapter_config(const std::string& json_text, const std::string& source) {
  const rapidjson::Document doc = parse_json(json_text, source, ErrorKind::Config);
  if (!doc.IsObject()) throw Error(ErrorKind::Config, source + ": must be a JSON object (PEFT's adapter_config.json)");
  LoraConfig c;
  c.source = source;
  for (const auto& m : doc.GetObject()) {
    const std::string key = m.name.GetString();
    if (listed(kKeys, key)) {
      read_key(c, key, m.value, source);
    } else if (listed(kOffOnly, key)) {
      if (!is_off(m.value))
        bad(source, key, "is a PEFT option dsx does not implement; remove it or set it to null");
    } else if (!listed(kBookkeeping, key)) {
      bad(source, key, "is not a LoraConfig key dsx knows; check its spelling against PEFT's LoraConfig");
    }
  }
  return c;
}

LoraConfig read_peft_adapter_config(const std::string& path) {
  return parse_peft_adapter_config(read_bounded_file(path), path);
}

namespace {

bool is_directory(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

[[noreturn]] void bad_flag(const std::string& text, const std::string& what) {
  throw Error(ErrorKind::Usage,
              "--lora '" + text + "': " + what +
                  "; write e.g. --lora r=8,alpha=16,dropout=0.05,targets=q_proj,v_proj or give a PEFT "
                  "adapter_config.json");
}

double flag_number(const std::string& text, const std::string& key, const std::string& value) {
  try {
    size_t used = 0;
    const double d = std::stod(value, &used);
    if (used == value.size() && std::isfinite(d)) return d;
  } catch (const std::exception&) {
  }
  bad_flag(text, key + "=" + value + " is not a number");
}

void apply_flag_item(LoraConfig& c, const std::string& text, const std::string& key, const std::string& value) {
  if (key == "r") {
    const double r = flag_number(text, key, value);
    if (r < 1 || r != std::floor(r) || r > kMaxRank) bad_flag(text, "r must be a positive integer up to 65536");
    c.r = static_cast<int>(r);
  } else if (key == "alpha") {
    c.alpha = flag_number(text, key, value);
    if (!(c.alpha > 0)) bad_flag(text, "alpha must be positive");
  } else if (key == "dropout") {
    c.dropout = flag_number(text, key, value);
    if (c.dropout < 0 || c.dropout >= 1) bad_flag(text, "dropout must be in [0, 1)");
  } else if (key == "rslora") {
    if (value != "true" && value != "false") bad_flag(text, "rslora must be true or false");
    c.use_rslora = value == "true";
  } else if (key == "init") {
    if (value == "true" || value == "kaiming") c.init = LoraInit::kaiming;
    else if (value == "gaussian") c.init = LoraInit::gaussian;
    else if (value == "false") c.init = LoraInit::random;
    else bad_flag(text, "init must be true, gaussian or false");
  } else if (key == "bias") {
    if (value != "none" && value != "all" && value != "lora_only") bad_flag(text, "bias must be none, all or lora_only");
    c.bias = value;
  } else if (key == "modules_to_save") {
    c.modules_to_save.push_back(value);
  } else if (key == "targets") {
    if (value == "all-linear") c.all_linear = true;
    else if (value.size() > 2 && value.front() == '/' && value.back() == '/') c.target_regex = value.substr(1, value.size() - 2);
    else c.target_names.push_back(value);
  } else {
    bad_flag(text, "unknown key '" + key + "' (known: r, alpha, dropout, targets, modules_to_save, rslora, init, bias)");
  }
}

}  // namespace

LoraConfig parse_lora_flag(const std::string& text) {
  if (text.find('=') == std::string::npos) {
    const std::string path = is_directory(text) ? text + "/adapter_config.json" : text;
    return read_peft_adapter_config(path);
  }
  LoraConfig c;
  c.source = "--lora " + text;
  std::string key;
  size_t begin = 0;
  while (begin <= text.size()) {
    const size_t end = std::min(text.find(',', begin), text.size());
    const std::string item = text.substr(begin, end - begin);
    begin = end + 1;
    if (item.empty()) bad_flag(text, "an empty item between commas");
    const size_t eq = item.find('=');
    if (eq == std::string::npos) {
      if (key != "targets" && key != "modules_to_save")
        bad_flag(text, "'" + item + "' has no '=' and follows no targets= or modules_to_save= list");
      apply_flag_item(c, text, key, item);
      continue;
    }
    key = item.substr(0, eq);
    apply_flag_item(c, text, key, item.substr(eq + 1));
  }
  if (c.target_regex) {
    try {
      std::regex check(*c.target_regex);
    } catch (const std::regex_error& e) {
      bad_flag(text, "targets=/" + *c.target_regex + "/ is not a valid regular expression");
    }
  }
  return c;
}

std::string peft_adapter_config_json(const LoraConfig& c, const std::string& base_model) {
  rapidjson::StringBuffer out;
  rapidjson::PrettyWriter<rapidjson::StringBuffer> w(out);
  w.SetIndent(' ', 2);
  // PEFT writes its keys sorted (json.dump(sort_keys=True)); so does this.
  w.StartObject();
  w.Key("base_model_name_or_path"), w.String(base_model.c_str());
  w.Key("bias"), w.String(c.bias.c_str());
  w.Key("fan_in_fan_out"), w.Bool(c.fan_in_fan_out);
  w.Key("inference_mode"), w.Bool(true);
  w.Key("init_lora_weights");
  if (c.init == LoraInit::gaussian) w.String("gaussian");
  else w.Bool(c.init == LoraInit::kaiming);
  w.Key("lora_alpha"), w.Double(c.alpha);
  w.Key("lora_dropout"), w.Double(c.dropout);
  w.Key("modules_to_save");
  if (c.modules_to_save.empty()) {
    w.Null();
  } else {
    w.StartArray();
    for (const auto& m : c.modules_to_save) w.String(m.c_str());
    w.EndArray();
  }
  w.Key("peft_type"), w.String("LORA");
  w.Key("r"), w.Int(c.r);
  w.Key("target_modules");
  if (c.all_linear) {
    w.String("all-linear");
  } else if (c.target_regex) {
    w.String(c.target_regex->c_str());
  } else {
    w.StartArray();
    for (const auto& t : c.target_names) w.String(t.c_str());
    w.EndArray();
  }
  w.Key("task_type"), w.String("CAUSAL_LM");
  w.Key("use_rslora"), w.Bool(c.use_rslora);
  w.EndObject();
  return std::string(out.GetString()) + "\n";
}

}  // namespace dsx::models
