// JSONL lines with FILE:LINE errors (see jsonl.h).
#include "dataset/jsonl.h"

#include <rapidjson/error/en.h>

#include "dsx/error.h"

namespace dsx::dataset {

rapidjson::Document parse_jsonl_object(std::string_view text, const JsonlLine& at) {
  rapidjson::Document d;
  d.Parse<rapidjson::kParseValidateEncodingFlag>(text.data(), text.size());
  if (d.HasParseError()) {
    throw Error(ErrorKind::Format, at.where() + ": not JSON (" +
                                       rapidjson::GetParseError_En(d.GetParseError()) +
                                       " at column " + std::to_string(d.GetErrorOffset() + 1) +
                                       "); each line must be one JSON object");
  }
  if (!d.IsObject()) {
    throw Error(
        ErrorKind::Format,
        at.where() + ": a JSON value that is not an object; each line must be one JSON object");
  }
  return d;
}

std::optional<std::string> string_member(const rapidjson::Value& object, const char* key,
                                         const JsonlLine& at) {
  auto it = object.FindMember(key);
  if (it == object.MemberEnd() || it->value.IsNull()) {
    return std::nullopt;
  }
  if (!it->value.IsString()) {
    throw Error(ErrorKind::Format, at.where() + ": field '" + key + "' must be a string");
  }
  return std::string(it->value.GetString(), it->value.GetStringLength());
}

}  // namespace dsx::dataset
