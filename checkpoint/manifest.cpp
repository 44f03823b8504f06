// JSON form of the manifests (RapidJSON). CRCs are written as 8 hex digits so that a person can
// compare them with `dsx`'s error messages.
#include "checkpoint/manifest.h"

#include <rapidjson/document.h>
#include <rapidjson/prettywriter.h>
#include <rapidjson/stringbuffer.h>

#include <cinttypes>
#include <cstdio>
#include <set>

#include "dsx/error.h"
#include "dsx/json_input.h"

namespace dsx::checkpoint {
namespace {

using Writer = rapidjson::PrettyWriter<rapidjson::StringBuffer>;

std::string crc_hex(uint32_t crc) {
  char text[16];
  std::snprintf(text, sizeof text, "%08" PRIx32, crc);
  return text;
}

void write_files(Writer& w, const std::vector<FileRecord>& files) {
  w.Key("files");
  w.StartArray();
  for (const auto& f : files) {
    w.StartObject();
    w.Key("name");
    w.String(f.name.c_str(), static_cast<rapidjson::SizeType>(f.name.size()));
    w.Key("size");
    w.Uint64(f.size);
    w.Key("crc32c");
    w.String(crc_hex(f.crc32c).c_str());
    w.EndObject();
  }
  w.EndArray();
}

[[noreturn]] void bad(const std::string& origin, const std::string& what) {
  throw Error(ErrorKind::Format, origin + " is not a valid dsx checkpoint manifest: " + what);
}

rapidjson::Document parse(std::string_view json, const std::string& origin) {
  rapidjson::Document doc = parse_json(json, origin);
  if (!doc.IsObject()) bad(origin, "not a JSON object");
  return doc;
}

const rapidjson::Value& member(const rapidjson::Value& obj, const char* key,
                               const std::string& origin) {
  auto it = obj.FindMember(key);
  if (it == obj.MemberEnd()) bad(origin, std::string("missing \"") + key + "\"");
  return it->value;
}

int read_int(const rapidjson::Value& obj, const char* key, const std::string& origin) {
  const auto& v = member(obj, key, origin);
  if (!v.IsInt() || v.GetInt() < 0) bad(origin, std::string("\"") + key + "\" is not a count");
  return v.GetInt();
}

RankManifest read_rank(const rapidjson::Value& obj, const std::string& origin) {
  if (!obj.IsObject()) bad(origin, "a rank entry is not an object");
  RankManifest m;
  m.rank = read_int(obj, "rank", origin);
  const auto& files = member(obj, "files", origin);
  if (!files.IsArray()) bad(origin, "\"files\" is not an array");
  for (const auto& f : files.GetArray()) {
    if (!f.IsObject()) bad(origin, "a file entry is not an object");
    const auto& name = member(f, "name", origin);
    const auto& size = member(f, "size", origin);
    const auto& crc = member(f, "crc32c", origin);
    if (!name.IsString() || !size.IsUint64() || !crc.IsString() || crc.GetStringLength() != 8)
      bad(origin, "a file entry needs a string name, a size and an 8-hex-digit crc32c");
    FileRecord r;
    r.name = name.GetString();
    r.size = size.GetUint64();
    char* end = nullptr;
    r.crc32c = static_cast<uint32_t>(std::strtoul(crc.GetString(), &end, 16));
    if (*end != '\0') bad(origin, "crc32c \"" + std::string(crc.GetString()) + "\" is not hex");
    if (r.name.empty() || r.name.find('/') != std::string::npos || r.name[0] == '.')
      bad(origin, "file name \"" + r.name + "\" is not a plain file name");
    m.files.push_back(std::move(r));
  }
  return m;
}

// The optional fields: node-local placement, the save's id and step.
void read_placement(const rapidjson::Value& doc, const std::string& origin, CheckpointManifest& m) {
  if (doc.HasMember("node")) {
    NodePart part{read_int(doc, "node", origin), read_int(doc, "nodes", origin)};
    if (part.count < 1 || part.index >= part.count)
      bad(origin, "\"node\" " + std::to_string(part.index) + " is not one of " +
                      std::to_string(part.count) + " nodes");
    m.node = part;
  }
  if (auto it = doc.FindMember("save_id"); it != doc.MemberEnd()) {
    if (!it->value.IsString()) bad(origin, "\"save_id\" is not a string");
    m.save_id = it->value.GetString();
  }
  if (auto it = doc.FindMember("step"); it != doc.MemberEnd()) {
    if (!it->value.IsInt64() || it->value.GetInt64() < 0) bad(origin, "\"step\" is not a count");
    m.step = it->value.GetInt64();
  }
}

// Shared storage: one entry per rank, 0..world-1. A node's copy: its ranks, ascending.
void check_rank_entries(const CheckpointManifest& m, const std::string& origin) {
  if (m.node) {
    if (m.ranks.empty()) bad(origin, "a node's manifest lists no rank");
    for (size_t i = 0; i < m.ranks.size(); ++i)
      if (m.ranks[i].rank >= m.world_size || (i > 0 && m.ranks[i].rank <= m.ranks[i - 1].rank))
        bad(origin, "rank entries are not ascending ranks below world size " +
                        std::to_string(m.world_size));
    return;
  }
  if (static_cast<int>(m.ranks.size()) != m.world_size)
    bad(origin, "it lists " + std::to_string(m.ranks.size()) + " ranks for world size " +
                    std::to_string(m.world_size));
  for (int i = 0; i < m.world_size; ++i)
    if (m.ranks[i].rank != i)
      bad(origin, "rank entries are not in rank order 0.." + std::to_string(m.world_size - 1));
}

}  // namespace

std::string RankManifest::to_json() const {
  rapidjson::StringBuffer out;
  Writer w(out);
  w.StartObject();
  w.Key("rank");
  w.Int(rank);
  write_files(w, files);
  w.EndObject();
  return out.GetString();
}

RankManifest RankManifest::from_json(std::string_view json, const std::string& origin) {
  return read_rank(parse(json, origin), origin);
}

std::string CheckpointManifest::to_json() const {
  rapidjson::StringBuffer out;
  Writer w(out);
  w.StartObject();
  w.Key("format");
  w.String("dsx-checkpoint");
  w.Key("version");
  w.Int(kManifestVersion);
  w.Key("tag");
  w.String(tag.c_str(), static_cast<rapidjson::SizeType>(tag.size()));
  w.Key("world_size");
  w.Int(world_size);
  if (node) {
    w.Key("node");
    w.Int(node->index);
    w.Key("nodes");
    w.Int(node->count);
  }
  if (!save_id.empty()) {
    w.Key("save_id");
    w.String(save_id.c_str(), static_cast<rapidjson::SizeType>(save_id.size()));
  }
  if (step >= 0) {
    w.Key("step");
    w.Int64(step);
  }
  w.Key("ranks");
  w.StartArray();
  for (const auto& r : ranks) {
    w.StartObject();
    w.Key("rank");
    w.Int(r.rank);
    write_files(w, r.files);
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
  std::string text = out.GetString();
  return text + "\n";
}

CheckpointManifest CheckpointManifest::from_json(std::string_view json, const std::string& origin) {
  auto doc = parse(json, origin);
  const auto& format = member(doc, "format", origin);
  if (!format.IsString() || std::string_view(format.GetString()) != "dsx-checkpoint")
    bad(origin, "\"format\" is not \"dsx-checkpoint\"");
  int version = read_int(doc, "version", origin);
  if (version != kManifestVersion)
    throw Error(ErrorKind::Unsupported, origin + " has manifest version " +
                                            std::to_string(version) + "; this dsx reads version " +
                                            std::to_string(kManifestVersion) +
                                            ": use a matching dsx");
  CheckpointManifest m;
  const auto& tag = member(doc, "tag", origin);
  if (!tag.IsString()) bad(origin, "\"tag\" is not a string");
  m.tag = tag.GetString();
  m.world_size = read_int(doc, "world_size", origin);
  const auto& ranks = member(doc, "ranks", origin);
  if (!ranks.IsArray()) bad(origin, "\"ranks\" is not an array");
  std::set<std::string> names;
  for (const auto& r : ranks.GetArray()) {
    m.ranks.push_back(read_rank(r, origin));
    for (const auto& f : m.ranks.back().files)
      if (!names.insert(f.name).second) bad(origin, "file \"" + f.name + "\" is listed twice");
  }
  read_placement(doc, origin, m);
  check_rank_entries(m, origin);
  return m;
}

const FileRecord* CheckpointManifest::find(std::string_view name) const {
  for (const auto& r : ranks)
    for (const auto& f : r.files)
      if (f.name == name) return &f;
  return nullptr;
}

}  // namespace dsx::checkpoint
