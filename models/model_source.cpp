// Family dispatch for the engine and the tools (see model_source.h).
#include "models/model_source.h"

#include <algorithm>
#include <filesystem>

#include "dsx/error.h"
#include "dsx/join.h"
#include "models/gpt2/factory.h"
#include "models/gpt2/gpt2_cpu.h"
#include "models/io/gpt2_weights.h"
#include "models/io/hf_folder.h"
#include "models/llama/factory.h"
#include "models/llama/hf_config.h"

namespace dsx::models {

namespace {

bool is_gpt2(const ModelShape& s) { return s.family == ModelShape::Family::GPT2; }

int int_member(const rapidjson::Value& obj, const char* key, const std::string& origin) {
  auto it = obj.FindMember(key);
  if (it == obj.MemberEnd() || !it->value.IsInt()) {
    throw Error(ErrorKind::Format, origin + ": the model description lacks \"" + std::string(key) +
                                       "\" (was it saved by dsx train?)");
  }
  return it->value.GetInt();
}

ModelShape gpt2_shape(const GPT2Config& c) {
  ModelShape s;
  s.gpt2 = c;
  return s;
}

ModelShape llama_shape(const LlamaConfig& c) {
  ModelShape s;
  s.family = ModelShape::Family::Llama;
  s.llama = c;
  return s;
}

std::vector<std::string> all_preset_names() {
  std::vector<std::string> names = gpt2_preset_names();
  for (const auto& n : llama_preset_names()) names.push_back(n);
  return names;
}

ModelSource from_folder(const std::string& dir) {
  ModelSource m;
  m.folder = dir;
  if (hf_folder_kind(dir) == HfFolderKind::Llama) {
    LlamaWeights w = read_llama_hf_folder(dir);
    m.shape = llama_shape(w.config);
    m.initial = std::move(w.params);
    return m;
  }
  // GPT-2 folders hold model.safetensors with its config.json beside it (read for n_head).
  const std::string weights = dir + "/model.safetensors";
  if (!std::filesystem::exists(weights) && std::filesystem::exists(dir + "/model.safetensors.index.json")) {
    throw Error(ErrorKind::Unsupported, "--model " + dir + ": this GPT-2 folder has sharded weights "
                                        "(model.safetensors.index.json); dsx reads a GPT-2 folder from one "
                                        "model.safetensors: save it unsharded (save_pretrained(dir, "
                                        "max_shard_size=\"100GB\"))");
  }
  if (!std::filesystem::exists(weights)) {
    throw Error(ErrorKind::Usage, "--model " + dir + ": a folder needs config.json and model.safetensors (or a "
                                  "sharded model.safetensors.index.json) of a Hugging Face model");
  }
  GPT2Weights w = read_gpt2_safetensors(weights);
  m.shape = gpt2_shape(w.config);
  m.initial = std::move(w.params);
  return m;
}

}  // namespace

int ModelShape::max_seq_len() const { return is_gpt2(*this) ? gpt2.max_seq_len : longest_exact_sequence(llama); }
int ModelShape::vocab_size() const { return is_gpt2(*this) ? gpt2.vocab_size : llama.vocab_size; }
int ModelShape::hidden_size() const { return is_gpt2(*this) ? gpt2.channels : llama.hidden_size; }
std::string ModelShape::family_name() const { return is_gpt2(*this) ? "gpt2" : llama.model_type; }

ModelSource load_model_source(const std::string& name) {
  if (std::filesystem::is_directory(name)) return from_folder(name);
  if (std::filesystem::exists(name)) {
    ModelSource m;
    GPT2Weights w = load_gpt2_weights(name);
    m.shape = gpt2_shape(w.config);
    m.initial = std::move(w.params);
    return m;
  }
  const auto llama = llama_preset_names();
  if (std::find(llama.begin(), llama.end(), name) != llama.end()) return ModelSource{llama_shape(llama_preset(name)), {}, ""};
  const auto gpt2 = gpt2_preset_names();
  if (std::find(gpt2.begin(), gpt2.end(), name) != gpt2.end()) return ModelSource{gpt2_shape(gpt2_preset(name)), {}, ""};
  throw Error(ErrorKind::Config, "--model '" + name + "' is neither a file, a Hugging Face model folder nor a preset (" +
                                     join(all_preset_names(), ", ") + ")");
}

std::unique_ptr<Model> build_model(const ModelShape& shape, const BuildOptions& o) {
  return is_gpt2(shape) ? make_gpt2(shape.gpt2, o) : make_llama(shape.llama, o);
}

// Both families have CUDA kernels in a CUDA build (models/gpt2/gpt2_cuda.h, models/llama/llama_cuda.h).
bool has_cuda_kernels(const ModelShape& shape) {
#ifdef DSX_HAVE_CUDA
  (void)shape;
  return true;
#else
  return is_gpt2(shape);
#endif
}

std::unique_ptr<Model> build_host_model(const ModelShape& shape, int max_batch, int max_seq) {
  BuildOptions o;
  o.max_batch = max_batch;
  o.max_seq = max_seq;
  return build_model(shape, o);
}

std::vector<ParamSpec> param_specs(const ModelShape& shape) {
  return is_gpt2(shape) ? gpt2_param_specs(shape.gpt2) : llama_param_specs(shape.llama);
}

std::vector<float> initial_parameters(const ModelShape& shape, uint64_t seed) {
  const auto model = build_host_model(shape, 1, 1);
  std::vector<float> flat(model->num_params());
  model->init_params(flat.data(), seed);
  return flat;
}

void write_shape_json(rapidjson::Writer<rapidjson::StringBuffer>& w, const ModelShape& shape) {
  w.StartObject();
  if (is_gpt2(shape)) {
    const GPT2Config& c = shape.gpt2;
    w.Key("type"), w.String("gpt2");
    w.Key("max_seq_len"), w.Int(c.max_seq_len);
    w.Key("vocab_size"), w.Int(c.vocab_size);
    w.Key("padded_vocab_size"), w.Int(c.padded_vocab_size);
    w.Key("num_layers"), w.Int(c.num_layers);
    w.Key("num_heads"), w.Int(c.num_heads);
    w.Key("channels"), w.Int(c.channels);
  } else {
    w.Key("type"), w.String("llama");
    const std::string config = llama_hf_config_json(shape.llama, "float32");
    w.Key("config"), w.RawValue(config.c_str(), config.size(), rapidjson::kObjectType);
  }
  w.EndObject();
}

ModelShape read_shape_json(const rapidjson::Value& model, const std::string& origin) {
  auto type = model.FindMember("type");
  const std::string name = type != model.MemberEnd() && type->value.IsString() ? type->value.GetString() : "gpt2";
  if (name == "llama") {
    auto config = model.FindMember("config");
    if (config == model.MemberEnd() || !config->value.IsObject()) {
      throw Error(ErrorKind::Format, origin + ": the Llama model description lacks its \"config\" object");
    }
    rapidjson::StringBuffer text;
    rapidjson::Writer<rapidjson::StringBuffer> w(text);
    config->value.Accept(w);
    return llama_shape(parse_llama_hf_config(text.GetString(), origin).config);
  }
  if (name != "gpt2") throw Error(ErrorKind::Format, origin + ": unknown model type \"" + name + "\" in its description");
  GPT2Config c;
  c.max_seq_len = int_member(model, "max_seq_len", origin);
  c.vocab_size = int_member(model, "vocab_size", origin);
  c.padded_vocab_size = int_member(model, "padded_vocab_size", origin);
  c.num_layers = int_member(model, "num_layers", origin);
  c.num_heads = int_member(model, "num_heads", origin);
  c.channels = int_member(model, "channels", origin);
  validate(c);
  return gpt2_shape(c);
}

std::string hf_config_json(const ModelShape& shape, kernels::DType dtype) {
  if (is_gpt2(shape)) return gpt2_hf_config_json(shape.gpt2);
  return llama_hf_config_json(shape.llama, dtype == kernels::DType::BF16 ? "bfloat16"
                                        : dtype == kernels::DType::F16 ? "float16"
                                                                        : "float32");
}

void write_hf_weights(const std::string& weights_path, const ModelShape& shape, const float* flat, kernels::DType dtype,
                      const std::string& tokenizer_folder) {
  const std::filesystem::path out(weights_path);
  const std::string dir = out.has_parent_path() ? out.parent_path().string() : ".";
  if (is_gpt2(shape)) {
    if (dtype == kernels::DType::F16) throw Error(ErrorKind::Usage, "GPT-2 weights are written in fp32 or bf16, not fp16");
    write_gpt2_safetensors(weights_path, shape.gpt2, flat, dtype);
    write_gpt2_hf_config(dir + "/config.json", shape.gpt2);
    copy_hf_tokenizer_files(tokenizer_folder, dir);
  } else {
    HfWriteOptions options;
    options.dtype = dtype;
    options.tokenizer_from = tokenizer_folder;
    write_llama_hf_folder(dir, shape.llama, flat, options);
  }
}

}  // namespace dsx::models
