// The stop ids of generation_config.json (see generation_config.h).
#include "tokenizer/generation_config.h"

#include <filesystem>

#include "tokenizer/json_file.h"

namespace dsx::tokenizer {

std::vector<int32_t> generation_stop_ids(const std::string& folder) {
  const std::string path = (std::filesystem::path(folder) / "generation_config.json").string();
  if (!std::filesystem::exists(path)) return {};
  const rapidjson::Document doc = json::parse(json::read_file(path), path);
  const json::At at{path, ""};
  const json::Value& root = json::require_object(doc, at);
  const json::Value* eos = json::member(root, "eos_token_id");
  if (!eos || eos->IsNull()) return {};
  if (!eos->IsArray()) return {static_cast<int32_t>(json::as_int(*eos, at / "eos_token_id"))};
  std::vector<int32_t> ids;
  for (rapidjson::SizeType i = 0; i < eos->Size(); ++i)
    ids.push_back(static_cast<int32_t>(json::as_int((*eos)[i], (at / "eos_token_id")[i])));
  return ids;
}

}  // namespace dsx::tokenizer
