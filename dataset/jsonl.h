// One line of a JSONL file as a JSON object, with errors that name FILE:LINE, the field and
// what a line must hold.
#pragma once

#include <rapidjson/document.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace dsx::dataset {

struct JsonlLine {
  const std::string& file;
  uint64_t line;
  std::string where() const { return file + ":" + std::to_string(line); }
};

// Error(Format) "FILE:LINE: not a JSON object (...)" when the line is not one.
rapidjson::Document parse_jsonl_object(std::string_view text, const JsonlLine& at);
// The string member `key`; nullopt when absent or null, Error(Format) when another type.
std::optional<std::string> string_member(const rapidjson::Value& object, const char* key,
                                         const JsonlLine& at);

}  // namespace dsx::dataset
