// Small path look-ups on RapidJSON values, so that each check reads like the CLI's field names.
#include "cloud/cli_json.h"

#include <rapidjson/error/en.h>

#include <cstdlib>

#include "dsx/error.h"
#include "dsx/json_input.h"

namespace dsx::cloud {

rapidjson::Document parse_cli_json(std::string_view json, const char* source) {
  try {
    return parse_json(json, std::string(source) + " output");
  } catch (const Error& e) {
    throw Error(ErrorKind::Format, std::string(e.what()) + " (run it with --output json / --format=json)");
  }
}

const rapidjson::Value* json_at(const rapidjson::Value& root, std::string_view path) {
  const rapidjson::Value* v = &root;
  while (!path.empty()) {
    const size_t dot = path.find('.');
    const std::string part(path.substr(0, dot));
    path = dot == std::string_view::npos ? "" : path.substr(dot + 1);
    if (v->IsArray()) {
      char* end = nullptr;
      const unsigned long i = std::strtoul(part.c_str(), &end, 10);
      if (end == part.c_str() || *end || i >= v->Size()) return nullptr;
      v = &(*v)[rapidjson::SizeType(i)];
    } else if (v->IsObject()) {
      auto it = v->FindMember(part.c_str());
      if (it == v->MemberEnd()) return nullptr;
      v = &it->value;
    } else {
      return nullptr;
    }
  }
  return v;
}

std::string string_at(const rapidjson::Value& root, std::string_view path) {
  const auto* v = json_at(root, path);
  return v && v->IsString() ? v->GetString() : "";
}

double number_at(const rapidjson::Value& root, std::string_view path, double fallback) {
  const auto* v = json_at(root, path);
  if (v && v->IsNumber()) return v->GetDouble();
  if (v && v->IsString()) {  // GCP prints 64-bit integers as strings ("count": "4")
    char* end = nullptr;
    const double d = std::strtod(v->GetString(), &end);
    if (end != v->GetString() && *end == '\0') return d;
  }
  return fallback;
}

bool bool_at(const rapidjson::Value& root, std::string_view path, bool fallback) {
  const auto* v = json_at(root, path);
  return v && v->IsBool() ? v->GetBool() : fallback;
}

}  // namespace dsx::cloud
