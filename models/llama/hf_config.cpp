// config.json <-> LlamaConfig (see hf_config.h). Defaults for absent keys are the transformers
// class defaults of the model type (LlamaConfig, MistralConfig, Qwen2Config), so a file means
// here what it means to transformers.
#include "models/llama/hf_config.h"

#include <rapidjson/document.h>
#include <rapidjson/prettywriter.h>
#include <rapidjson/stringbuffer.h>

#include <cmath>
#include <sstream>

#include "dsx/error.h"
#include "dsx/json_input.h"
#include "models/io/files.h"

namespace dsx::models {

namespace {

using Value = rapidjson::Value;

const char* const kArchitectures[][2] = {{"LlamaForCausalLM", "llama"},
                                         {"MistralForCausalLM", "mistral"},
                                         {"Qwen2ForCausalLM", "qwen2"}};
const char* const kSupported =
    "LlamaForCausalLM (llama), MistralForCausalLM (mistral), Qwen2ForCausalLM (qwen2)";

// The keys of one JSON object of the file, with the messages that name file and key.
class Keys {
 public:
  Keys(const Value& object, std::string path, std::string prefix = "")
      : obj_(object), path_(std::move(path)), prefix_(std::move(prefix)) {}

  bool has(const char* key) const { return obj_.HasMember(key); }  // even when null
  // Present and not null (transformers reads null as "use the default").
  const Value* get(const char* key) const {
    auto it = obj_.FindMember(key);
    return it == obj_.MemberEnd() || it->value.IsNull() ? nullptr : &it->value;
  }
  [[noreturn]] void bad(const char* key, const std::string& what,
                        ErrorKind kind = ErrorKind::Config) const {
    throw Error(kind, "config.json '" + path_ + "': key '" + prefix_ + key + "' " + what);
  }
  int positive_int(const char* key, int fallback) const {
    const Value* v = get(key);
    if (!v) {
      if (fallback > 0) return fallback;
      bad(key, "is missing; a Llama-family config.json must give it");
    }
    if (!v->IsInt() || v->GetInt() <= 0) bad(key, "must be a positive integer, got " + text(*v));
    return v->GetInt();
  }
  double positive_number(const char* key, double fallback) const {
    const Value* v = get(key);
    if (!v) return fallback;
    if (!v->IsNumber() || !(v->GetDouble() > 0) || !std::isfinite(v->GetDouble()))
      bad(key, "must be a positive number, got " + text(*v));
    return v->GetDouble();
  }
  bool boolean(const char* key, bool fallback) const {
    const Value* v = get(key);
    if (!v) return fallback;
    if (!v->IsBool()) bad(key, "must be true or false, got " + text(*v));
    return v->GetBool();
  }
  std::string string(const char* key, const std::string& fallback) const {
    const Value* v = get(key);
    if (!v) return fallback;
    if (!v->IsString()) bad(key, "must be a string, got " + text(*v));
    return v->GetString();
  }
  const std::string& path() const { return path_; }

  static std::string text(const Value& v) {
    if (v.IsString()) return "\"" + std::string(v.GetString()) + "\"";
    if (v.IsBool()) return v.GetBool() ? "true" : "false";
    if (v.IsInt64()) return std::to_string(v.GetInt64());
    if (v.IsNumber()) {
      std::ostringstream s;
      s << v.GetDouble();
      return s.str();
    }
    return v.IsArray() ? "an array" : v.IsObject() ? "an object" : "null";
  }

 private:
  const Value& obj_;
  std::string path_, prefix_;
};

// architectures[0] and model_type, which must name the same supported family.
void read_identity(const Keys& k, LlamaConfig& c) {
  std::string arch;
  if (const Value* a = k.get("architectures")) {
    if (!a->IsArray() || a->Empty() || !(*a)[0].IsString())
      k.bad("architectures", "must be a list of names");
    arch = (*a)[0].GetString();
  }
  std::string type = k.string("model_type", "");
  if (arch.empty() && type.empty())
    k.bad("architectures",
          "and model_type are both missing; " + std::string("dsx reads ") + kSupported);
  for (const auto& [a, t] : kArchitectures) {
    if (arch == a || (arch.empty() && type == t)) {
      if (!type.empty() && type != t)
        k.bad("model_type",
              "is \"" + type + "\" but architectures names " + a + " (model_type \"" + t + "\")");
      c.architecture = a;
      c.model_type = t;
      return;
    }
  }
  const std::string what = arch.empty() ? "model_type \"" + type + "\"" : arch;
  throw Error(ErrorKind::Unsupported, "config.json '" + k.path() + "': " + what +
                                          " is not a model dsx can load; supported: " + kSupported +
                                          " (and GPT2LMHeadModel through the GPT-2 readers)");
}

void read_shape(const Keys& k, LlamaConfig& c) {
  const bool llama = c.model_type == "llama", mistral = c.model_type == "mistral";
  c.vocab_size = k.positive_int("vocab_size", 0);
  c.hidden_size = k.positive_int("hidden_size", 0);
  c.intermediate_size = k.positive_int("intermediate_size", 0);
  c.num_layers = k.positive_int("num_hidden_layers", 0);
  c.num_heads = k.positive_int("num_attention_heads", 0);
  // Absent: the class default (MistralConfig 8, Qwen2Config 32, LlamaConfig none); null or no
  // default: the head count, as their __post_init__ sets it.
  const int kv_default = !k.has("num_key_value_heads") ? (mistral ? 8 : llama ? 0 : 32) : 0;
  c.num_kv_heads = k.positive_int("num_key_value_heads", kv_default ? kv_default : c.num_heads);
  if (c.hidden_size % c.num_heads != 0 && !k.get("head_dim"))
    k.bad("hidden_size", "(" + std::to_string(c.hidden_size) +
                             ") is not a multiple of num_attention_heads (" +
                             std::to_string(c.num_heads) + ") and no head_dim is given");
  c.head_dim = k.positive_int("head_dim", c.hidden_size / c.num_heads);
  c.max_position_embeddings = k.positive_int("max_position_embeddings", llama     ? 2048
                                                                        : mistral ? 131072
                                                                                  : 32768);
  c.rms_norm_eps = k.positive_number("rms_norm_eps", LlamaConfig{}.rms_norm_eps);
}

// rope_scaling (4.x) wins over rope_parameters (5.x), as transformers' convert_rope_params_to_dict
// has it; rope_theta comes from that dict, else the top-level key, else 10000.
void read_rope(const Keys& k, LlamaConfig& c) {
  const char* key = k.get("rope_scaling") ? "rope_scaling" : "rope_parameters";
  const Value* dict = k.get(key);
  double theta = k.positive_number("rope_theta", LlamaConfig{}.rope_theta);
  if (!dict) {
    c.rope_theta = theta;
    return;
  }
  if (!dict->IsObject()) k.bad(key, "must be an object or null, got " + Keys::text(*dict));
  Keys r(*dict, k.path(), std::string(key) + ".");
  c.rope_theta = r.positive_number("rope_theta", theta);
  std::string type = r.string("rope_type", r.string("type", "default"));
  if (const Value* p = r.get("partial_rotary_factor");
      p && !(p->IsNumber() && p->GetDouble() == 1.0))
    r.bad("partial_rotary_factor", "is not 1: dsx rotates the whole head", ErrorKind::Unsupported);
  RopeScaling& s = c.rope_scaling;
  if (type == "default") {
    s.kind = RopeScaling::Kind::None;
  } else if (type == "linear") {
    s.kind = RopeScaling::Kind::Linear;
    s.factor = r.positive_number("factor", 0);
    if (s.factor == 0) r.bad("factor", "is missing; rope_type linear needs it");
  } else if (type == "llama3") {
    s.kind = RopeScaling::Kind::Llama3;
    for (const char* need : {"factor", "low_freq_factor", "high_freq_factor"})
      if (!r.get(need))
        r.bad(need,
              "is missing; rope_type llama3 needs factor, low_freq_factor and high_freq_factor");
    s.factor = r.positive_number("factor", 1);
    s.low_freq_factor = r.positive_number("low_freq_factor", 1);
    s.high_freq_factor = r.positive_number("high_freq_factor", 4);
    if (s.high_freq_factor <= s.low_freq_factor)
      r.bad("high_freq_factor", "must be greater than low_freq_factor");
    s.original_max_position_embeddings =
        r.positive_int("original_max_position_embeddings", c.max_position_embeddings);
  } else {
    r.bad("rope_type", "is \"" + type + "\"; dsx computes default, llama3 and linear RoPE only",
          ErrorKind::Unsupported);
  }
}

// A sliding window changes attention only for sequences longer than it, and none is longer than
// max_position_embeddings: so a window that long is full causal attention exactly.
void check_window(const Keys& k, const LlamaConfig& c, int window, const std::string& fix) {
  if (window > 0 && window < c.max_position_embeddings)
    k.bad("sliding_window",
          "is " + std::to_string(window) + ", shorter than max_position_embeddings (" +
              std::to_string(c.max_position_embeddings) +
              "): dsx's attention is full causal, so sequences longer than the window would be "
              "computed differently; " +
              fix + " to train with full attention",
          ErrorKind::Unsupported);
}

// sliding_window as the config classes read it: absent is their default 4096, null is none (0).
int sliding_window(const Keys& k) {
  if (!k.has("sliding_window")) return 4096;
  return k.get("sliding_window") ? k.positive_int("sliding_window", 0) : 0;
}

void read_attention(const Keys& k, LlamaConfig& c) {
  if (c.model_type == "mistral") c.sliding_window = sliding_window(k);  // trained up to its length
  // Qwen2 ignores its window unless use_sliding_window is set.
  if (c.model_type == "qwen2" && k.boolean("use_sliding_window", false))
    check_window(k, c, sliding_window(k), "set use_sliding_window to false");
  if (c.model_type == "llama") {
    c.qkv_bias = c.o_bias = k.boolean("attention_bias", false);
    if (k.boolean("mlp_bias", false))
      k.bad("mlp_bias", "is true: dsx's Llama MLP has no biases", ErrorKind::Unsupported);
  } else if (c.model_type == "qwen2") {
    c.qkv_bias = true;  // Qwen2Attention: q, k, v with bias, o without, always
    c.o_bias = false;
  }
  std::string act = k.string("hidden_act", "silu");
  if (act != "silu")
    k.bad("hidden_act", "is \"" + act + "\"; dsx's MLP is SwiGLU with silu",
          ErrorKind::Unsupported);
  if (const Value* d = k.get("attention_dropout"); d && !(d->IsNumber() && d->GetDouble() == 0))
    k.bad("attention_dropout", "is not 0: dsx has no attention dropout", ErrorKind::Unsupported);
  if (k.get("quantization_config"))
    k.bad("quantization_config", "is present: dsx loads F32, BF16 or F16 weights only",
          ErrorKind::Unsupported);
}

// Absent: the class default; null: none (-1); a list (Llama 3.1 instruct's several end tokens):
// its first, the one dsx writes.
int token_id(const Keys& k, const char* key, int fallback) {
  if (!k.has(key)) return fallback;
  const Value* v = k.get(key);
  if (!v) return -1;
  if (v->IsArray()) {
    if (v->Empty() || !(*v)[0].IsInt() || (*v)[0].GetInt() < 0)
      k.bad(key, "must be a non-negative integer or a list of them");
    return (*v)[0].GetInt();
  }
  if (!v->IsInt() || v->GetInt() < 0)
    k.bad(key, "must be a non-negative integer or a list of them, got " + Keys::text(*v));
  return v->GetInt();
}

using JsonWriter = rapidjson::PrettyWriter<rapidjson::StringBuffer>;

void check_exportable(const LlamaConfig& c) {
  validate(c);
  bool known = false;
  for (const auto& [a, t] : kArchitectures) known |= c.architecture == a && c.model_type == t;
  if (!known)
    throw Error(ErrorKind::Unsupported, "no config.json for architecture '" + c.architecture +
                                            "' with model_type '" + c.model_type +
                                            "'; dsx writes " + kSupported);
  const std::string& t = c.model_type;
  const bool ok = t == "qwen2"     ? c.qkv_bias && !c.o_bias
                  : t == "mistral" ? !c.qkv_bias && !c.o_bias
                  : t == "llama"   ? c.qkv_bias == c.o_bias
                                   : false;
  if (!ok)
    throw Error(ErrorKind::Unsupported,
                "config.json for model_type \"" + t + "\" cannot say q/k/v bias " +
                    (c.qkv_bias ? "on" : "off") + " with o_proj bias " + (c.o_bias ? "on" : "off") +
                    " (llama: attention_bias sets all four; qwen2: q/k/v only; mistral: none)");
}

void write_rope_scaling(JsonWriter& w, const RopeScaling& s) {
  w.Key("rope_scaling");
  if (s.kind == RopeScaling::Kind::None) {
    w.Null();
    return;
  }
  w.StartObject();
  w.Key("factor");
  w.Double(s.factor);
  if (s.kind == RopeScaling::Kind::Llama3) {
    w.Key("high_freq_factor");
    w.Double(s.high_freq_factor);
    w.Key("low_freq_factor");
    w.Double(s.low_freq_factor);
    w.Key("original_max_position_embeddings");
    w.Int(s.original_max_position_embeddings);
  }
  w.Key("rope_type");
  w.String(s.kind == RopeScaling::Kind::Llama3 ? "llama3" : "linear");
  w.EndObject();
}

void write_int(JsonWriter& w, const char* key, int v) {
  w.Key(key);
  if (v < 0)
    w.Null();
  else
    w.Int(v);
}

void write_bool(JsonWriter& w, const char* key, bool v) {
  w.Key(key);
  w.Bool(v);
}

}  // namespace

// Keys in transformers' order (sorted), the class defaults dsx does not use written explicitly
// so the file says what the weights were trained with.
std::string llama_hf_config_json(const LlamaConfig& c, const std::string& torch_dtype) {
  check_exportable(c);
  const bool llama = c.model_type == "llama", qwen2 = c.model_type == "qwen2";
  rapidjson::StringBuffer sb;
  JsonWriter w(sb);
  w.SetIndent(' ', 2);
  w.StartObject();
  w.Key("architectures");
  w.StartArray();
  w.String(c.architecture.c_str());
  w.EndArray();
  if (llama) write_bool(w, "attention_bias", c.o_bias);
  w.Key("attention_dropout");
  w.Double(0.0);
  write_int(w, "bos_token_id", c.bos_token_id);
  write_int(w, "eos_token_id", c.eos_token_id);
  if (!qwen2 || c.head_dim * c.num_heads != c.hidden_size) write_int(w, "head_dim", c.head_dim);
  w.Key("hidden_act");
  w.String("silu");
  write_int(w, "hidden_size", c.hidden_size);
  w.Key("initializer_range");
  w.Double(0.02);
  write_int(w, "intermediate_size", c.intermediate_size);
  write_int(w, "max_position_embeddings", c.max_position_embeddings);
  if (llama) write_bool(w, "mlp_bias", false);
  w.Key("model_type");
  w.String(c.model_type.c_str());
  write_int(w, "num_attention_heads", c.num_heads);
  write_int(w, "num_hidden_layers", c.num_layers);
  write_int(w, "num_key_value_heads", c.num_kv_heads);
  w.Key("rms_norm_eps");
  w.Double(c.rms_norm_eps);
  write_rope_scaling(w, c.rope_scaling);
  w.Key("rope_theta");
  w.Double(c.rope_theta);
  if (!llama) write_int(w, "sliding_window", c.sliding_window > 0 ? c.sliding_window : -1);
  write_bool(w, "tie_word_embeddings", c.tie_word_embeddings);
  w.Key("torch_dtype");
  w.String(torch_dtype.c_str());
  write_bool(w, "use_cache", true);
  if (qwen2) write_bool(w, "use_sliding_window", false);
  write_int(w, "vocab_size", c.vocab_size);
  w.EndObject();
  return std::string(sb.GetString(), sb.GetSize()) + "\n";
}

bool is_llama_family_architecture(const std::string& architecture) {
  for (const auto& [a, t] : kArchitectures)
    if (architecture == a) return true;
  return false;
}

bool is_llama_family_model_type(const std::string& model_type) {
  for (const auto& [a, t] : kArchitectures)
    if (model_type == t) return true;
  return false;
}

LlamaHfConfig parse_llama_hf_config(const std::string& json_text, const std::string& path) {
  const rapidjson::Document doc = parse_json(json_text, path, ErrorKind::Config);
  if (!doc.IsObject()) throw Error(ErrorKind::Config, "config.json '" + path + "': not a JSON object");
  Keys k(doc, path);
  LlamaHfConfig out;
  LlamaConfig& c = out.config;
  read_identity(k, c);
  read_shape(k, c);
  read_rope(k, c);
  read_attention(k, c);
  c.tie_word_embeddings = k.boolean("tie_word_embeddings", false);  // False in all three classes
  const bool qwen2 = c.model_type == "qwen2";
  // bos/eos: Llama and Mistral default to 1 and 2, Qwen2 to none.
  c.bos_token_id = token_id(k, "bos_token_id", qwen2 ? -1 : 1);
  c.eos_token_id = token_id(k, "eos_token_id", qwen2 ? -1 : 2);
  out.torch_dtype = k.string("torch_dtype", k.string("dtype", ""));
  try {
    validate(c);
  } catch (const Error& e) {
    throw Error(ErrorKind::Config, "config.json '" + path + "': " + e.what());
  }
  return out;
}

LlamaHfConfig read_llama_hf_config(const std::string& path) {
  return parse_llama_hf_config(
      read_text_file(path, "a Hugging Face model folder needs its config.json"), path);
}

}  // namespace dsx::models
