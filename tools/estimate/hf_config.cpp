// config.json → ModelShape with RapidJSON; every error names the file, the key and the fix.
#include "tools/estimate/hf_config.h"

#include <rapidjson/document.h>

#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <optional>
#include <sstream>

#include "dsx/error.h"
#include "dsx/json_input.h"

namespace dsx::estimate {

namespace {

// The first of `keys` that is present; null values count as absent (GPT-2's n_inner: null).
std::optional<int64_t> find_int(const rapidjson::Value& root,
                                std::initializer_list<const char*> keys,
                                const std::string& origin) {
  for (const char* key : keys) {
    auto it = root.FindMember(key);
    if (it == root.MemberEnd() || it->value.IsNull()) continue;
    if (!it->value.IsInt64() || it->value.GetInt64() < 0) {
      throw Error(ErrorKind::Config, origin + ": \"" + key + "\" must be a non-negative integer");
    }
    return it->value.GetInt64();
  }
  return std::nullopt;
}

int64_t require_int(const rapidjson::Value& root, std::initializer_list<const char*> keys,
                    const std::string& origin) {
  if (auto v = find_int(root, keys, origin)) return *v;
  std::string names;
  for (const char* key : keys) names += std::string(names.empty() ? "\"" : " or \"") + key + "\"";
  throw Error(ErrorKind::Config,
              origin + ": missing " + names +
                  "; is this a Hugging Face config.json of a decoder-only model?");
}

}  // namespace

ModelShape parse_hf_config(const std::string& json, const std::string& origin) {
  const rapidjson::Document doc = parse_json(json, origin, ErrorKind::Config);
  if (!doc.IsObject())
    throw Error(ErrorKind::Config, origin + ": expected a JSON object at the top level");

  ModelShape s;
  std::string model_type = "unknown";
  if (auto it = doc.FindMember("model_type"); it != doc.MemberEnd() && it->value.IsString()) {
    model_type = it->value.GetString();
  }
  s.name = origin;
  s.arch = model_type == "gpt2" ? Architecture::Gpt2 : Architecture::Llama;
  s.hidden = require_int(doc, {"hidden_size", "n_embd"}, origin);
  s.layers = require_int(doc, {"num_hidden_layers", "n_layer"}, origin);
  s.heads = require_int(doc, {"num_attention_heads", "n_head"}, origin);
  s.vocab = require_int(doc, {"vocab_size"}, origin);
  s.kv_heads = find_int(doc, {"num_key_value_heads"}, origin).value_or(s.heads);
  if (s.arch == Architecture::Gpt2) {
    s.intermediate = find_int(doc, {"n_inner", "intermediate_size"}, origin).value_or(4 * s.hidden);
  } else {
    s.intermediate = require_int(doc, {"intermediate_size"}, origin);
  }
  s.max_seq_len =
      find_int(doc, {"max_position_embeddings", "n_positions", "n_ctx"}, origin).value_or(0);
  if (s.arch == Architecture::Gpt2 && s.max_seq_len == 0) {
    throw Error(ErrorKind::Config,
                origin + ": missing \"n_positions\" (GPT-2 learns one embedding per position)");
  }
  // Transformers' GPT-2 ties by default; Llama, Mistral and Qwen2 configs default to untied.
  s.tied_embeddings = s.arch == Architecture::Gpt2;
  if (auto it = doc.FindMember("tie_word_embeddings"); it != doc.MemberEnd()) {
    if (!it->value.IsBool())
      throw Error(ErrorKind::Config, origin + ": \"tie_word_embeddings\" must be true or false");
    s.tied_embeddings = it->value.GetBool();
  }
  validate(s);
  return s;
}

ModelShape read_hf_config(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    throw Error(ErrorKind::Io, "'" + path + "' is a directory; give the config.json inside it");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw Error(ErrorKind::Io,
                "cannot open '" + path + "'; give the path of a Hugging Face config.json");
  return parse_hf_config(read_bounded_file(path), path);
}

}  // namespace dsx::estimate
