// A token field is a string, null, or an AddedToken object ({"content": "<s>", ...}; older
// files add "__type": "AddedToken").
#include "tokenizer/tokenizer_config.h"

#include <filesystem>

#include "tokenizer/json_file.h"

namespace dsx::tokenizer {
namespace {

std::optional<std::string> read_token(const json::Value& root, const char* key,
                                      const json::At& at) {
  const json::Value* v = json::member(root, key);
  if (!v || v->IsNull()) return std::nullopt;
  if (v->IsObject()) {
    return json::as_string(json::require_member(*v, "content", at / key), at / key / "content");
  }
  if (!v->IsString())
    json::wrong_type(at / key, "a string, an object with \"content\" or null", *v);
  return std::string(v->GetString(), v->GetStringLength());
}

std::optional<std::string> read_chat_template(const json::Value& root, const json::At& at) {
  const json::Value* v = json::member(root, "chat_template");
  if (!v || v->IsNull()) return std::nullopt;
  if (v->IsString()) return std::string(v->GetString(), v->GetStringLength());
  if (!v->IsArray()) json::wrong_type(at / "chat_template", "a string or a list of {\"name\", \"template\"}", *v);
  std::string names;
  for (size_t i = 0; i < v->Size(); ++i) {
    const auto item_at = (at / "chat_template")[i];
    const json::Value& named = json::require_object((*v)[static_cast<rapidjson::SizeType>(i)], item_at);
    const std::string name = json::as_string(json::require_member(named, "name", item_at), item_at / "name");
    if (name == "default")
      return json::as_string(json::require_member(named, "template", item_at), item_at / "template");
    names += (names.empty() ? "" : ", ") + name;
  }
  json::bad_value(at / "chat_template", "lists templates named " + names +
                                            " but none named \"default\", the one training and sampling use");
}

}  // namespace

TokenizerConfig read_tokenizer_config(const std::string& path) {
  TokenizerConfig config;
  if (!std::filesystem::exists(path)) return config;
  config.source = path;
  rapidjson::Document doc = json::parse(json::read_file(path), path);
  const json::At at{path, ""};
  json::require_object(doc, at);
  config.bos_token = read_token(doc, "bos_token", at);
  config.eos_token = read_token(doc, "eos_token", at);
  config.unk_token = read_token(doc, "unk_token", at);
  config.pad_token = read_token(doc, "pad_token", at);
  config.add_bos_token = json::optional_bool(doc, "add_bos_token", at);
  config.add_eos_token = json::optional_bool(doc, "add_eos_token", at);
  config.tokenizer_class = json::optional_string(doc, "tokenizer_class", at);
  config.legacy = json::optional_bool(doc, "legacy", at);
  config.add_prefix_space = json::optional_bool(doc, "add_prefix_space", at);
  config.chat_template = read_chat_template(doc, at);
  return config;
}

}  // namespace dsx::tokenizer
