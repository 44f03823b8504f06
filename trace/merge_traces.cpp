// Joining rank traces (see merge_traces.h).
#include "trace/merge_traces.h"

#include <rapidjson/document.h>
#include <rapidjson/error/en.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "dsx/error.h"
#include "dsx/json_input.h"

namespace dsx::trace {

std::vector<std::string> rank_trace_files(const std::string& dir) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) {
    throw Error(ErrorKind::Io, dir + " is not a directory (give the DIR of dsx train --profile DIR)");
  }
  const std::regex name("rank([0-9]+)\\.trace\\.json");
  std::vector<std::pair<long, std::string>> found;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    std::smatch m;
    const std::string file = entry.path().filename().string();
    if (std::regex_match(file, m, name)) found.emplace_back(std::stol(m[1]), entry.path().string());
  }
  if (found.empty()) throw Error(ErrorKind::Io, dir + " holds no rank<r>.trace.json file (has a traced window ended?)");
  std::sort(found.begin(), found.end());
  std::vector<std::string> files;
  for (auto& [rank, path] : found) files.push_back(std::move(path));
  return files;
}

size_t merge_traces(const std::vector<std::string>& files, const std::string& out) {
  rapidjson::Document merged(rapidjson::kObjectType);
  auto& a = merged.GetAllocator();
  rapidjson::Value events(rapidjson::kArrayType);
  size_t spans = 0;
  for (const std::string& path : files) {
    rapidjson::Document doc = parse_json(read_bounded_file(path), path);
    if (!doc.IsObject() || !doc.HasMember("traceEvents") || !doc["traceEvents"].IsArray())
      throw Error(ErrorKind::Format, path + " is not a Chrome trace (no traceEvents array)");
    for (auto& e : doc["traceEvents"].GetArray()) {
      if (e.IsObject() && e.HasMember("ph") && e["ph"] == "X") ++spans;
      events.PushBack(rapidjson::Value(e, a), a);
    }
  }
  merged.AddMember("traceEvents", events, a);
  merged.AddMember("displayTimeUnit", "ms", a);
  rapidjson::StringBuffer buffer;
  rapidjson::Writer<rapidjson::StringBuffer> writer(buffer);
  merged.Accept(writer);
  const std::string partial = out + ".partial";
  {
    std::ofstream o(partial, std::ios::binary | std::ios::trunc);
    o.write(buffer.GetString(), static_cast<std::streamsize>(buffer.GetSize()));
    if (!o.flush()) throw Error(ErrorKind::Io, "cannot write " + partial + " (is the disk full?)");
  }
  std::filesystem::rename(partial, out);
  return spans;
}

}  // namespace dsx::trace
