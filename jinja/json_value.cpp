// JSON to values (see json_value.h).
#include "jinja/json_value.h"

namespace dsx::jinja {

Value from_json(const rapidjson::Value& json) {
  switch (json.GetType()) {
    case rapidjson::kNullType: return Value::none();
    case rapidjson::kFalseType: return false;
    case rapidjson::kTrueType: return true;
    case rapidjson::kStringType: return std::string(json.GetString(), json.GetStringLength());
    case rapidjson::kNumberType:
      if (json.IsInt64()) return json.GetInt64();
      return json.GetDouble();
    case rapidjson::kArrayType: {
      List list;
      list.reserve(json.Size());
      for (const auto& item : json.GetArray()) list.push_back(from_json(item));
      return list;
    }
    case rapidjson::kObjectType: {
      Dict dict;
      for (const auto& m : json.GetObject())
        dict.set(std::string(m.name.GetString(), m.name.GetStringLength()), from_json(m.value));
      return dict;
    }
  }
  return Value();
}

}  // namespace dsx::jinja
