#include "tokenizer/json_file.h"

#include "dsx/error.h"
#include "dsx/json_input.h"

namespace dsx::tokenizer::json {

std::string read_file(const std::string& path) { return read_bounded_file(path); }

rapidjson::Document parse(const std::string& text, const std::string& path) {
  return parse_json(text, path, ErrorKind::Format);
}

const char* type_name(const Value& v) {
  switch (v.GetType()) {
    case rapidjson::kNullType: return "null";
    case rapidjson::kFalseType:
    case rapidjson::kTrueType: return "a boolean";
    case rapidjson::kObjectType: return "an object";
    case rapidjson::kArrayType: return "an array";
    case rapidjson::kStringType: return "a string";
    case rapidjson::kNumberType: return "a number";
  }
  return "unknown";
}

void wrong_type(const At& at, const char* expected, const Value& found) {
  throw Error(ErrorKind::Format, at.file + ": " + (at.path.empty() ? "the top level" : at.path) +
                                     " must be " + expected + ", found " + type_name(found) +
                                     "; the file is not as Hugging Face writes it (re-save it "
                                     "with the tokenizers or transformers library)");
}

void bad_value(const At& at, const std::string& what) {
  throw Error(ErrorKind::Format, at.file + ": " + at.path + " " + what);
}

const Value& require_object(const Value& v, const At& at) {
  if (!v.IsObject()) wrong_type(at, "an object", v);
  return v;
}

const Value& require_array(const Value& v, const At& at) {
  if (!v.IsArray()) wrong_type(at, "an array", v);
  return v;
}

const Value* member(const Value& object, const char* key) {
  auto it = object.FindMember(key);
  return it == object.MemberEnd() ? nullptr : &it->value;
}

const Value& require_member(const Value& object, const char* key, const At& at) {
  const Value* v = member(object, key);
  if (!v) {
    throw Error(ErrorKind::Format, at.file + ": " + (at / key).path +
                                       " is missing; the file is not as Hugging Face writes it");
  }
  return *v;
}

std::string as_string(const Value& v, const At& at) {
  if (!v.IsString()) wrong_type(at, "a string", v);
  return {v.GetString(), v.GetStringLength()};
}

bool as_bool(const Value& v, const At& at) {
  if (!v.IsBool()) wrong_type(at, "a boolean", v);
  return v.GetBool();
}

int64_t as_int(const Value& v, const At& at) {
  if (!v.IsInt64()) wrong_type(at, "an integer", v);
  return v.GetInt64();
}

std::optional<std::string> optional_string(const Value& object, const char* key, const At& at) {
  const Value* v = member(object, key);
  if (!v || v->IsNull()) return std::nullopt;
  return as_string(*v, at / key);
}

std::optional<bool> optional_bool(const Value& object, const char* key, const At& at) {
  const Value* v = member(object, key);
  if (!v || v->IsNull()) return std::nullopt;
  return as_bool(*v, at / key);
}

}  // namespace dsx::tokenizer::json
