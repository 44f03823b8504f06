// Reading the JSON that the cloud CLIs print (aws --output json, gcloud --format=json).
#pragma once

#include <rapidjson/document.h>

#include <string>
#include <string_view>

namespace dsx::cloud {

// Throws dsx::Error(Format) naming `source` (the command) when `json` does not parse.
rapidjson::Document parse_cli_json(std::string_view json, const char* source);

// The member at `path` ("NetworkInfo.EfaSupported": keys separated by dots; a number selects
// an array element), or nullptr when any part is missing.
const rapidjson::Value* json_at(const rapidjson::Value& root, std::string_view path);

// The string / number / bool at `path`, or the fallback when it is missing or of another type
// (a number may be written as a string, as GCP does for 64-bit integers).
std::string string_at(const rapidjson::Value& root, std::string_view path);
double number_at(const rapidjson::Value& root, std::string_view path, double fallback = -1);
bool bool_at(const rapidjson::Value& root, std::string_view path, bool fallback = false);

}  // namespace dsx::cloud
