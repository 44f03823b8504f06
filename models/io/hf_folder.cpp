// Llama-family Hugging Face model folders in and out (see hf_folder.h).
#include "models/io/hf_folder.h"

#include <rapidjson/document.h>
#include <rapidjson/prettywriter.h>
#include <rapidjson/stringbuffer.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <set>

#include "dsx/error.h"
#include "dsx/json_input.h"
#include "models/io/files.h"
#include "models/io/folder_tensors.h"
#include "models/io/safetensors.h"
#include "models/llama/hf_config.h"

namespace dsx::models {

namespace fs = std::filesystem;

namespace {

[[noreturn]] void bad(const std::string& file, const std::string& what) {
  throw Error(ErrorKind::Format, "'" + file + "': " + what);
}

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

// Tensor `name` as fp32 into `out` (t.numel() elements), whatever its stored dtype.
void to_float(float* out, const Located& t, const std::string& name) {
  const TensorView& v = *t.view;
  const size_t n = v.numel();
  if (v.dtype == "F32") {
    std::memcpy(out, v.data, n * 4);
    return;
  }
  if (v.dtype != "BF16" && v.dtype != "F16")
    bad(*t.file, "tensor '" + name + "' has dtype " + v.dtype + "; dsx reads F32, BF16 or F16");
  const bool bf16 = v.dtype == "BF16";
  for (size_t i = 0; i < n; ++i) {
    uint16_t h;
    std::memcpy(&h, v.data + 2 * i, 2);
    out[i] = bf16 ? kernels::bf16_to_float(h) : kernels::fp16_to_float(h);
  }
}

bool is_buffer(const std::string& name) {
  const std::string suffix = "rotary_emb.inv_freq";  // a buffer older converters saved
  return name.size() >= suffix.size() &&
         name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// A tied model's lm_head.weight, when a file has one, must be the embedding: transformers
// replaces it by the embedding, so a different one would silently be dropped.
void check_tied_head(const FolderTensors& ft, const LlamaConfig& c, const float* embedding) {
  const Located* head = ft.find("lm_head.weight");
  if (!head) return;
  const std::vector<int64_t> want = {c.vocab_size, c.hidden_size};
  if (head->view->shape != want)
    bad(*head->file, "tensor 'lm_head.weight' has shape " + shape_text(head->view->shape) +
                         ", expected " + shape_text(want));
  std::vector<float> v(head->view->numel());
  to_float(v.data(), *head, "lm_head.weight");
  if (std::memcmp(v.data(), embedding, v.size() * 4) != 0)
    bad(*head->file,
        "holds an lm_head.weight that differs from model.embed_tokens.weight, but config.json "
        "says tie_word_embeddings: true; set it to false to keep the separate head");
}

void check_no_strangers(const FolderTensors& ft, const std::vector<ParamSpec>& specs,
                        const LlamaConfig& c, const std::string& dir) {
  std::set<std::string> known;
  for (const ParamSpec& s : specs) known.insert(s.name);
  for (const auto& [name, t] : ft.tensors()) {
    if (known.count(name) || is_buffer(name) || (c.tie_word_embeddings && name == "lm_head.weight"))
      continue;
    bad(*t.file, "holds tensor '" + name + "', which the " + c.architecture + " of '" + dir +
                     "/config.json' has no place for (" + std::to_string(c.num_layers) +
                     " layers, " + (c.qkv_bias ? "q/k/v biases" : "no q/k/v biases") +
                     (c.tie_word_embeddings ? ", tied head" : ", own head") + ")");
  }
}

// The layers the weights hold (model.layers.<i>.*), checked against config.json before anything
// is sized by it: a config.json saying 100000 layers once made dsx allocate 18 GB first.
void check_layer_count(const FolderTensors& ft, const LlamaConfig& c, const std::string& dir) {
  int64_t held = 0;
  const std::string prefix = "model.layers.";
  for (const auto& [name, t] : ft.tensors()) {
    if (name.rfind(prefix, 0) != 0) continue;
    held = std::max<int64_t>(held, std::atoll(name.c_str() + prefix.size()) + 1);
  }
  if (held != c.num_layers)
    throw Error(ErrorKind::Format, "'" + dir + "/config.json' says num_hidden_layers " +
                                       std::to_string(c.num_layers) + ", but its weights hold " +
                                       std::to_string(held) +
                                       " layers; give the folder the config.json its weights were saved with");
}

}  // namespace

HfFolderKind hf_folder_kind(const std::string& dir) {
  const std::string path = dir + "/config.json";
  const std::string text = read_text_file(path, "a Hugging Face model folder needs its config.json");
  const rapidjson::Document doc = parse_json(text, path, ErrorKind::Config);
  if (!doc.IsObject()) throw Error(ErrorKind::Config, "config.json '" + path + "': not a JSON object");
  std::string arch, type;
  if (doc.HasMember("architectures") && doc["architectures"].IsArray() &&
      !doc["architectures"].Empty() && doc["architectures"][0].IsString())
    arch = doc["architectures"][0].GetString();
  if (doc.HasMember("model_type") && doc["model_type"].IsString())
    type = doc["model_type"].GetString();
  if (arch == "GPT2LMHeadModel" || (arch.empty() && type == "gpt2")) return HfFolderKind::Gpt2;
  if (is_llama_family_architecture(arch) || (arch.empty() && is_llama_family_model_type(type)))
    return HfFolderKind::Llama;
  const std::string what = !arch.empty()   ? arch
                           : !type.empty() ? "model_type \"" + type + "\""
                                           : "no architectures";
  throw Error(ErrorKind::Unsupported,
              "config.json '" + path + "': " + what +
                  " is not a model dsx can load; supported: GPT2LMHeadModel, "
                  "LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM");
}

bool hf_folder_is_llama_family(const std::string& dir) {
  try {
    return hf_folder_kind(dir) == HfFolderKind::Llama;
  } catch (const Error&) {
    return false;
  }
}

LlamaWeights read_llama_hf_folder(const std::string& dir) {
  if (!fs::is_directory(dir))
    throw Error(ErrorKind::Io, "'" + dir + "' is not a folder; give the Hugging Face model folder");
  LlamaHfConfig hc = read_llama_hf_config(dir + "/config.json");
  LlamaWeights w{hc.config, hc.torch_dtype, {}};
  const LlamaConfig& c = w.config;
  FolderTensors ft(dir);
  check_layer_count(ft, c, dir);
  const std::vector<ParamSpec> specs = llama_param_specs(c);
  check_no_strangers(ft, specs, c, dir);
  // Every tensor is there with its shape before config.json's sizes allocate anything.
  for (const ParamSpec& s : specs) {
    const Located* t = ft.find(s.name);
    if (!t)
      throw Error(ErrorKind::Format, "'" + dir + "': tensor '" + s.name +
                                         "' is missing from its weights, "
                                         "though its config.json (" +
                                         c.architecture + ") needs it");
    if (t->view->shape != s.shape)
      bad(*t->file, "tensor '" + s.name + "' has shape " + shape_text(t->view->shape) +
                        ", config.json needs " + shape_text(s.shape));
  }
  w.params.assign(specs.back().offset + specs.back().numel, 0.0f);
  for (const ParamSpec& s : specs) to_float(w.params.data() + s.offset, *ft.find(s.name), s.name);
  if (c.tie_word_embeddings) check_tied_head(ft, c, w.params.data());
  return w;
}

namespace {

const char* safetensors_dtype(kernels::DType d) {
  return d == kernels::DType::F32 ? "F32" : d == kernels::DType::BF16 ? "BF16" : "F16";
}

const char* torch_dtype(kernels::DType d) {
  return d == kernels::DType::F32 ? "float32" : d == kernels::DType::BF16 ? "bfloat16" : "float16";
}

// Tensors to shards as huggingface_hub splits them: in order, a new shard when the next tensor
// would pass the limit, a tensor larger than the limit alone in its own.
std::vector<std::vector<size_t>> plan_shards(const std::vector<ParamSpec>& specs, size_t esize,
                                             size_t limit) {
  std::vector<std::vector<size_t>> shards;
  std::vector<size_t> current;
  size_t bytes = 0;
  for (size_t i = 0; i < specs.size(); ++i) {
    const size_t b = specs[i].numel * esize;
    if (b > limit) {
      shards.push_back({i});
      continue;
    }
    if (!current.empty() && bytes + b > limit) {
      shards.push_back(std::move(current));
      current.clear();
      bytes = 0;
    }
    current.push_back(i);
    bytes += b;
  }
  if (!current.empty()) shards.push_back(std::move(current));
  return shards;
}

void write_shard(const std::string& path, const std::vector<ParamSpec>& specs,
                 const std::vector<size_t>& which, const float* params, kernels::DType dtype) {
  SafetensorsWriter out;
  std::vector<uint16_t> half;
  for (size_t i : which) {
    const ParamSpec& s = specs[i];
    const float* src = params + s.offset;
    if (dtype == kernels::DType::F32) {
      out.add(s.name, "F32", s.shape, src, s.numel * 4);
      continue;
    }
    half.resize(s.numel);
    for (size_t j = 0; j < s.numel; ++j)
      half[j] = dtype == kernels::DType::BF16 ? kernels::float_to_bf16(src[j])
                                              : kernels::float_to_fp16(src[j]);
    out.add(s.name, safetensors_dtype(dtype), s.shape, half.data(), s.numel * 2);
  }
  out.set_metadata("format", "pt");  // transformers refuses safetensors without it
  out.write(path);
}

void write_text(const std::string& path, const std::string& text) {
  AtomicWriter out(path);
  out.write(text.data(), text.size());
  out.commit();
}

std::string index_json(const std::vector<ParamSpec>& specs, const std::vector<std::string>& file_of,
                       size_t esize) {
  std::map<std::string, std::string> weight_map;  // sorted by name, as transformers writes it
  size_t total = 0, count = 0;
  for (size_t i = 0; i < specs.size(); ++i) {
    weight_map[specs[i].name] = file_of[i];
    total += specs[i].numel * esize;
    count += specs[i].numel;
  }
  rapidjson::StringBuffer sb;
  rapidjson::PrettyWriter<rapidjson::StringBuffer> w(sb);
  w.SetIndent(' ', 2);
  w.StartObject();
  w.Key("metadata");
  w.StartObject();
  w.Key("total_parameters");
  w.Uint64(count);
  w.Key("total_size");
  w.Uint64(total);
  w.EndObject();
  w.Key("weight_map");
  w.StartObject();
  for (const auto& [name, file] : weight_map) {
    w.Key(name.c_str());
    w.String(file.c_str());
  }
  w.EndObject();
  w.EndObject();
  return std::string(sb.GetString(), sb.GetSize()) + "\n";
}

bool is_shard_name(const std::string& n) {
  int a = 0, b = 0;
  char tail[32] = {};
  return n.size() == std::strlen("model-00001-of-00001.safetensors") &&
         std::sscanf(n.c_str(), "model-%5d-of-%5d.%31s", &a, &b, tail) == 3 &&
         std::strcmp(tail, "safetensors") == 0;
}

// Weights files of an earlier save that the new one does not list: left there, a reader could
// take an old index (or an old single file) for the model.
void remove_stale(const std::string& dir, const std::set<std::string>& written) {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string n = entry.path().filename().string();
    const bool weights = n == kSingleFile || n == kIndexFile || is_shard_name(n);
    if (weights && !written.count(n)) fs::remove(entry.path(), ec);
  }
}

}  // namespace

void copy_hf_tokenizer_files(const std::string& from, const std::string& dir) {
  if (from.empty()) return;
  if (!fs::is_directory(from))
    throw Error(ErrorKind::Io, "tokenizer folder '" + from + "' is not a folder");
  std::error_code ec;
  if (fs::equivalent(from, dir, ec)) return;
  for (const std::string& name : hf_tokenizer_files()) {
    const std::string src = from + "/" + name;
    if (!fs::exists(src)) continue;
    MappedFile in(src);
    AtomicWriter out(dir + "/" + name);
    out.write(in.data(), in.size());
    out.commit();
  }
}

const std::vector<std::string>& hf_tokenizer_files() {
  static const std::vector<std::string> names = {"tokenizer.json",          "tokenizer.model",
                                                 "tokenizer_config.json",   "special_tokens_map.json",
                                                 "chat_template.jinja",     "generation_config.json"};
  return names;
}

void write_llama_hf_folder(const std::string& dir, const LlamaConfig& c, const float* params,
                           const HfWriteOptions& o) {
  const std::string config_text = llama_hf_config_json(c, torch_dtype(o.dtype));  // validates first
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (!fs::is_directory(dir))
    throw Error(ErrorKind::Io, "cannot create the model folder '" + dir + "': " + ec.message());
  const std::vector<ParamSpec> specs = llama_param_specs(c);
  const size_t esize = kernels::dtype_size(o.dtype);
  const auto shards = plan_shards(specs, esize, o.max_shard_bytes == 0 ? 1 : o.max_shard_bytes);
  std::set<std::string> written;
  if (shards.size() == 1) {
    write_shard(dir + "/" + kSingleFile, specs, shards[0], params, o.dtype);
    written.insert(kSingleFile);
  } else {
    std::vector<std::string> file_of(specs.size());
    for (size_t k = 0; k < shards.size(); ++k) {
      char name[64];
      std::snprintf(name, sizeof(name), "model-%05zu-of-%05zu.safetensors", k + 1, shards.size());
      write_shard(dir + "/" + name, specs, shards[k], params, o.dtype);
      for (size_t i : shards[k]) file_of[i] = name;
      written.insert(name);
    }
    write_text(dir + "/" + kIndexFile, index_json(specs, file_of, esize));  // after its shards
    written.insert(kIndexFile);
  }
  remove_stale(dir, written);
  write_text(dir + "/config.json", config_text);
  copy_hf_tokenizer_files(o.tokenizer_from, dir);
}

}  // namespace dsx::models
