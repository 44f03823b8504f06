// JSONL lines with FILE:LINE errors (see jsonl.h).
#include "dataset/jsonl.h"

#include "dsx/error.h"
#include "dsx/json_input.h"

namespace dsx::dataset {

rapidjson::Document parse_jsonl_object(std::string_view text, const JsonlLine& at) {
  // Through dsx's bounded JSON path: a line of 100,000 '[' is an error, not a stack overflow.
  // Without its line break, so that an error at its end is placed on this line.
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.remove_suffix(1);
  rapidjson::Document d = parse_json(text, at.file, ErrorKind::Format, at.line);
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
