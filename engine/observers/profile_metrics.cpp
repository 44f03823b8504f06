// The metrics file of a profiled run (see profile_metrics.h).
#include "engine/observers/profile_metrics.h"

#include <rapidjson/document.h>
#include <rapidjson/prettywriter.h>
#include <rapidjson/stringbuffer.h>

#include <fstream>
#include <iterator>

#include "dsx/error.h"
#include "dsx/json_input.h"
#include "checkpoint/durable_file.h"

namespace dsx::engine {

void write_profile_metrics(const std::string& path, const ProfileMetrics& m) {
  rapidjson::StringBuffer buffer;
  rapidjson::PrettyWriter<rapidjson::StringBuffer> w(buffer);
  w.StartObject();
  w.Key("latency"), w.Double(m.latency);
  w.Key("throughput"), w.Double(m.throughput);
  w.Key("FLOPS_per_gpu"), w.Double(m.flops_per_gpu);
  w.Key("peak_memory_bytes"), w.Int64(m.peak_memory_bytes);
  w.Key("activation_bytes"), w.Int64(m.activation_bytes);
  w.Key("memory_limit_bytes"), w.Int64(m.memory_limit_bytes);
  w.Key("profiled_steps"), w.Int64(m.profiled_steps);
  w.Key("latency_spread"), w.Double(m.latency_spread);
  w.EndObject();
  const std::string parent = checkpoint::parent_directory(path);
  if (!parent.empty()) checkpoint::make_directories(parent);
  checkpoint::write_file_durably(path, std::string(buffer.GetString()) + "\n");
}

ProfileMetrics read_profile_metrics(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(ErrorKind::Io, "no metrics file " + path + " (the run ended before end_profile_step?)");
  const rapidjson::Document d = parse_json(read_bounded_file(path), path);
  auto bad = [&](const std::string& what) {
    return Error(ErrorKind::Format, path + ": not a dsx metrics file (" + what + ")");
  };
  if (!d.IsObject()) throw bad("not a JSON object");
  auto number = [&](const char* key) {
    auto it = d.FindMember(key);
    if (it == d.MemberEnd() || !it->value.IsNumber()) throw bad(std::string("no number '") + key + "'");
    return it->value.GetDouble();
  };
  ProfileMetrics m;
  m.latency = number("latency");
  m.throughput = number("throughput");
  m.flops_per_gpu = number("FLOPS_per_gpu");
  m.peak_memory_bytes = static_cast<int64_t>(number("peak_memory_bytes"));
  m.activation_bytes = static_cast<int64_t>(number("activation_bytes"));
  m.memory_limit_bytes = static_cast<int64_t>(number("memory_limit_bytes"));
  m.profiled_steps = static_cast<int64_t>(number("profiled_steps"));
  auto spread = d.FindMember("latency_spread");  // absent in files of older dsx builds
  m.latency_spread = spread != d.MemberEnd() && spread->value.IsNumber() ? spread->value.GetDouble() : 0.0;
  return m;
}

}  // namespace dsx::engine
