// safetensors reading and writing (see safetensors.h), header JSON through RapidJSON.
#include "models/io/safetensors.h"

#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <algorithm>
#include <cstring>
#include <utility>
#include <vector>

#include "dsx/error.h"
#include "dsx/json_input.h"

namespace dsx::models {

namespace {

constexpr uint64_t kMaxHeader = 100u << 20;  // safetensors' own limit on the JSON header

[[noreturn]] void bad(const std::string& path, const std::string& what) {
  throw Error(ErrorKind::Format, "safetensors file '" + path + "': " + what +
                                     "; the file is damaged or not a safetensors file");
}

}  // namespace

size_t TensorView::numel() const {
  size_t n = 1;
  for (int64_t d : shape) n *= static_cast<size_t>(d);
  return n;
}

size_t safetensors_dtype_size(const std::string& d) {
  if (d == "F64" || d == "I64" || d == "U64") return 8;
  if (d == "F32" || d == "I32" || d == "U32") return 4;
  if (d == "F16" || d == "BF16" || d == "I16" || d == "U16") return 2;
  if (d == "I8" || d == "U8" || d == "BOOL" || d == "F8_E4M3" || d == "F8_E5M2") return 1;
  return 0;
}

SafetensorsReader::SafetensorsReader(const std::string& path) : SafetensorsReader(MappedFile(path)) {}

SafetensorsReader::SafetensorsReader(MappedFile file) : file_(std::move(file)) {
  const std::string& path = file_.path();
  if (file_.size() < 8) bad(path, "shorter than the 8-byte header length");
  uint64_t header_len = 0;
  std::memcpy(&header_len, file_.data(), 8);
  if (header_len > kMaxHeader || header_len > file_.size() - 8)
    bad(path, "header length " + std::to_string(header_len) + " exceeds the file (" +
                  std::to_string(file_.size()) + " bytes)");
  const rapidjson::Document doc =
      parse_json({reinterpret_cast<const char*>(file_.data() + 8), header_len}, path + "'s header");
  if (!doc.IsObject()) bad(path, "the header is not a JSON object");
  const uint8_t* buffer = file_.data() + 8 + header_len;
  const size_t buffer_size = file_.size() - 8 - header_len;
  for (auto it = doc.MemberBegin(); it != doc.MemberEnd(); ++it) {
    std::string name(it->name.GetString(), it->name.GetStringLength());
    const auto& v = it->value;
    if (name == "__metadata__") {
      if (!v.IsObject()) bad(path, "__metadata__ is not an object");
      for (auto m = v.MemberBegin(); m != v.MemberEnd(); ++m)
        if (m->value.IsString()) metadata_[m->name.GetString()] = m->value.GetString();
      continue;
    }
    if (!v.IsObject() || !v.HasMember("dtype") || !v["dtype"].IsString() || !v.HasMember("shape") ||
        !v["shape"].IsArray() || !v.HasMember("data_offsets") || !v["data_offsets"].IsArray() ||
        v["data_offsets"].Size() != 2 || !v["data_offsets"][0].IsUint64() || !v["data_offsets"][1].IsUint64())
      bad(path, "tensor '" + name + "' needs dtype, shape and two data_offsets");
    TensorView t;
    t.dtype = v["dtype"].GetString();
    for (const auto& d : v["shape"].GetArray()) {
      if (!d.IsInt64() || d.GetInt64() < 0) bad(path, "tensor '" + name + "' has a bad shape");
      t.shape.push_back(d.GetInt64());
    }
    uint64_t begin = v["data_offsets"][0].GetUint64(), end = v["data_offsets"][1].GetUint64();
    size_t esize = safetensors_dtype_size(t.dtype);
    if (esize == 0) bad(path, "tensor '" + name + "' has unknown dtype " + t.dtype);
    if (begin > end || end > buffer_size)
      bad(path, "tensor '" + name + "' data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) +
                    "] lie outside the " + std::to_string(buffer_size) + "-byte data (truncated file?)");
    if (end - begin != t.numel() * esize && t.dtype.rfind("F8_", 0) == 0)
      bad(path, "tensor '" + name + "' has dtype " + t.dtype +
                    ", which dsx does not support (it reads F32, BF16 and F16 weights; convert "
                    "the model to one of those)");
    if (end - begin != t.numel() * esize)
      bad(path, "tensor '" + name + "' holds " + std::to_string(end - begin) + " bytes, its shape needs " +
                    std::to_string(t.numel() * esize));
    t.data = buffer + begin;
    t.bytes = end - begin;
    tensors_.emplace(std::move(name), std::move(t));
  }
  // No two tensors may share bytes (safetensors itself refuses this too).
  std::vector<std::pair<const std::string*, const TensorView*>> by_offset;
  for (const auto& [name, t] : tensors_)
    if (t.bytes > 0) by_offset.emplace_back(&name, &t);
  std::sort(by_offset.begin(), by_offset.end(), [](const auto& a, const auto& b) { return a.second->data < b.second->data; });
  auto range = [&](const TensorView& t) {
    const size_t b = static_cast<size_t>(t.data - buffer);
    return "[" + std::to_string(b) + ", " + std::to_string(b + t.bytes) + "]";
  };
  for (size_t i = 1; i < by_offset.size(); ++i) {
    const auto& [pname, prev] = by_offset[i - 1];
    const auto& [cname, cur] = by_offset[i];
    if (prev->data + prev->bytes > cur->data)
      bad(path, "tensors '" + *pname + "' data_offsets " + range(*prev) + " and '" + *cname + "' data_offsets " +
                    range(*cur) + " overlap");
  }
}

const TensorView* SafetensorsReader::find(const std::string& name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second;
}

void SafetensorsWriter::add(const std::string& name, const std::string& dtype,
                            const std::vector<int64_t>& shape, const void* data, size_t bytes) {
  const auto* p = static_cast<const uint8_t*>(data);
  entries_.push_back({name, dtype, shape, std::vector<uint8_t>(p, p + bytes)});
}

void SafetensorsWriter::write(const std::string& path) const {
  rapidjson::StringBuffer sb;
  rapidjson::Writer<rapidjson::StringBuffer> w(sb);
  w.StartObject();
  if (!metadata_.empty()) {
    w.Key("__metadata__");
    w.StartObject();
    for (const auto& [k, v] : metadata_) {
      w.Key(k.c_str());
      w.String(v.c_str());
    }
    w.EndObject();
  }
  uint64_t offset = 0;
  for (const auto& e : entries_) {
    w.Key(e.name.c_str());
    w.StartObject();
    w.Key("dtype");
    w.String(e.dtype.c_str());
    w.Key("shape");
    w.StartArray();
    for (int64_t d : e.shape) w.Int64(d);
    w.EndArray();
    w.Key("data_offsets");
    w.StartArray();
    w.Uint64(offset);
    w.Uint64(offset + e.bytes.size());
    w.EndArray();
    w.EndObject();
    offset += e.bytes.size();
  }
  w.EndObject();
  std::string header(sb.GetString(), sb.GetSize());
  header.append((8 - header.size() % 8) % 8, ' ');  // data starts 8-byte aligned, as safetensors does
  uint64_t header_len = header.size();
  AtomicWriter out(path);
  out.write(&header_len, 8);
  out.write(header.data(), header.size());
  for (const auto& e : entries_) out.write(e.bytes.data(), e.bytes.size());
  out.commit();
}

}  // namespace dsx::models
