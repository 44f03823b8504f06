// One `"key": value` member of the JSON object being written, in one call: the shape of the
// `--json` output of `dsx report` and `dsx estimate`.
#pragma once

#include <rapidjson/prettywriter.h>
#include <rapidjson/stringbuffer.h>

#include <cstdint>
#include <string>

namespace dsx::tools {

using JsonWriter = rapidjson::PrettyWriter<rapidjson::StringBuffer>;

inline void field(JsonWriter& w, const char* key, const std::string& value) {
  w.Key(key);
  w.String(value.c_str());
}
inline void field(JsonWriter& w, const char* key, const char* value) {
  w.Key(key);
  w.String(value);
}
inline void field(JsonWriter& w, const char* key, bool value) {
  w.Key(key);
  w.Bool(value);
}
inline void field(JsonWriter& w, const char* key, int value) {
  w.Key(key);
  w.Int(value);
}
inline void field(JsonWriter& w, const char* key, int64_t value) {
  w.Key(key);
  w.Int64(value);
}

}  // namespace dsx::tools
