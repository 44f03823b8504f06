// Reading the JSON files of a tokenizer (tokenizer.json, tokenizer_config.json) with RapidJSON,
// with errors that name the file, the JSON path and what to do: a missing file, a syntax error
// (line and column), a member of the wrong type.
#pragma once

#include <rapidjson/document.h>

#include <optional>
#include <string>

namespace dsx::tokenizer::json {

using Value = rapidjson::Value;

// The whole file; dsx::Error (Io) when it cannot be read, (Format) past dsx's JSON size cap.
std::string read_file(const std::string& path);
// Parsed through dsx/json_input.h (UTF-8 checked, size and depth capped); dsx::Error (Format)
// with line and column when it is not JSON.
rapidjson::Document parse(const std::string& text, const std::string& path);

// "string", "number", "object", ... for messages.
const char* type_name(const Value& v);

// Where in which file a value sits, to name it in errors: {"DIR/tokenizer.json", "model.vocab"}.
struct At {
  const std::string& file;
  std::string path;
  At operator/(const std::string& key) const {
    return {file, path.empty() ? key : path + "." + key};
  }
  At operator[](size_t i) const { return {file, path + "[" + std::to_string(i) + "]"}; }
};

[[noreturn]] void wrong_type(const At& at, const char* expected, const Value& found);
[[noreturn]] void bad_value(const At& at, const std::string& what);

const Value& require_object(const Value& v, const At& at);
const Value& require_array(const Value& v, const At& at);
// A member of an object, or nullptr when it is absent.
const Value* member(const Value& object, const char* key);
// A member that must be there.
const Value& require_member(const Value& object, const char* key, const At& at);

std::string as_string(const Value& v, const At& at);
bool as_bool(const Value& v, const At& at);
int64_t as_int(const Value& v, const At& at);

// Absent and null both give nullopt; any other type than the one asked for is an error.
std::optional<std::string> optional_string(const Value& object, const char* key, const At& at);
std::optional<bool> optional_bool(const Value& object, const char* key, const At& at);

}  // namespace dsx::tokenizer::json
