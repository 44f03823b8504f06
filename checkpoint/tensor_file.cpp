// safetensors writing streamed through a DurableFile; reading through models/io/safetensors.
#include "checkpoint/tensor_file.h"

#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <algorithm>
#include <cstring>
#include <limits>

#include "dsx/error.h"
#include "dsx/json_input.h"
#include "checkpoint/durable_file.h"
#include "checkpoint/parallel_bytes.h"

namespace dsx::checkpoint {
namespace {

struct DTypeSpelling {
  TensorDType dtype;
  const char* name;
  size_t size;
};

constexpr DTypeSpelling kDTypes[] = {
    {TensorDType::F64, "F64", 8},   {TensorDType::F32, "F32", 4}, {TensorDType::F16, "F16", 2},
    {TensorDType::BF16, "BF16", 2}, {TensorDType::I64, "I64", 8}, {TensorDType::I32, "I32", 4},
    {TensorDType::I16, "I16", 2},   {TensorDType::I8, "I8", 1},   {TensorDType::U8, "U8", 1},
    {TensorDType::BOOL, "BOOL", 1},
};

// numel of `shape`, or false when a dimension is negative or the product overflows.
bool element_count(const std::vector<int64_t>& shape, uint64_t& numel) {
  numel = 1;
  for (int64_t d : shape) {
    if (d < 0) return false;
    if (d != 0 && numel > std::numeric_limits<uint64_t>::max() / static_cast<uint64_t>(d))
      return false;
    numel *= static_cast<uint64_t>(d);
  }
  return true;
}

std::string header_json(const std::vector<const TensorRef*>& order,
                        std::string_view metadata_json) {
  rapidjson::StringBuffer out;
  rapidjson::Writer<rapidjson::StringBuffer> w(out);
  w.StartObject();
  w.Key("__metadata__");
  w.StartObject();
  w.Key("format");
  w.String("pt");  // lets safetensors.torch.load_file accept the file
  if (!metadata_json.empty()) {
    w.Key(kMetadataKey);
    w.String(metadata_json.data(), static_cast<rapidjson::SizeType>(metadata_json.size()));
  }
  w.EndObject();
  uint64_t offset = 0;
  for (const TensorRef* t : order) {
    uint64_t numel = 0;
    if (!element_count(t->shape, numel))
      throw Error(ErrorKind::Internal, "tensor " + t->name + " has an invalid shape");
    uint64_t nbytes = numel * dtype_size(t->dtype);
    w.Key(t->name.c_str(), static_cast<rapidjson::SizeType>(t->name.size()));
    w.StartObject();
    w.Key("dtype");
    w.String(dtype_name(t->dtype));
    w.Key("shape");
    w.StartArray();
    for (int64_t d : t->shape) w.Int64(d);
    w.EndArray();
    w.Key("data_offsets");
    w.StartArray();
    w.Uint64(offset);
    w.Uint64(offset + nbytes);
    w.EndArray();
    w.EndObject();
    offset += nbytes;
  }
  w.EndObject();
  std::string header = out.GetString();
  header.append((8 - header.size() % 8) % 8, ' ');  // spaces pad the header, as the spec allows
  return header;
}

}  // namespace

const char* dtype_name(TensorDType dtype) {
  for (const auto& d : kDTypes)
    if (d.dtype == dtype) return d.name;
  return "?";
}

size_t dtype_size(TensorDType dtype) {
  for (const auto& d : kDTypes)
    if (d.dtype == dtype) return d.size;
  return 1;
}

void write_safetensors(DurableFile& out, std::span<const TensorRef> tensors,
                       std::string_view metadata_json) {
  if (!metadata_json.empty()) {
    if (!parse_json(metadata_json, out.path() + "'s metadata", ErrorKind::Internal).IsObject())
      throw Error(ErrorKind::Internal,
                  "checkpoint metadata for " + out.path() + " is not a JSON object");
  }
  std::vector<const TensorRef*> order;
  for (const auto& t : tensors) order.push_back(&t);
  std::stable_sort(order.begin(), order.end(), [](const TensorRef* a, const TensorRef* b) {
    return dtype_size(a->dtype) > dtype_size(b->dtype);
  });
  std::string header = header_json(order, metadata_json);
  uint64_t length = header.size();
  uint8_t prefix[8];
  for (int i = 0; i < 8; ++i) prefix[i] = static_cast<uint8_t>(length >> (8 * i));
  out.write(prefix, 8);
  out.write(header);
  for (const TensorRef* t : order) {
    uint64_t numel = 0;
    element_count(t->shape, numel);
    if (numel > 0 && t->data == nullptr)
      throw Error(ErrorKind::Internal, "tensor " + t->name + " has no data");
    out.write(t->data, numel * dtype_size(t->dtype));
  }
}

TensorFile TensorFile::load(const std::string& path) {
  TensorFile file;
  file.reader_ = std::make_unique<models::SafetensorsReader>(path);
  return file;
}

TensorFile TensorFile::parse(models::MappedFile mapped) {
  TensorFile file;
  file.reader_ = std::make_unique<models::SafetensorsReader>(std::move(mapped));
  return file;
}

std::vector<std::string> TensorFile::names() const {
  std::vector<std::string> names;
  for (const auto& [name, view] : reader_->tensors()) names.push_back(name);
  return names;
}

const models::TensorView& TensorFile::view(const std::string& name) const {
  if (const auto* v = reader_->find(name)) return *v;
  throw Error(ErrorKind::Format, origin() + " has no tensor \"" + name +
                                     "\": the checkpoint was written by a different model or "
                                     "engine configuration");
}

void TensorFile::read(const std::string& name, TensorDType dtype, void* dst, uint64_t numel) const {
  const models::TensorView& v = checked_view(name, dtype, numel);
  copy_parallel(dst, v.data, v.bytes);
}

const models::TensorView& TensorFile::checked_view(const std::string& name, TensorDType dtype,
                                                   uint64_t numel) const {
  const models::TensorView& v = view(name);
  if (v.dtype != dtype_name(dtype) || v.numel() != numel)
    throw Error(ErrorKind::Format,
                origin() + ": tensor \"" + name + "\" is " + v.dtype + " with " +
                    std::to_string(v.numel()) + " elements, expected " + dtype_name(dtype) +
                    " with " + std::to_string(numel) +
                    ": the checkpoint was written by a different model or configuration");
  return v;
}

std::string TensorFile::metadata_json() const {
  auto it = metadata().find(kMetadataKey);
  return it == metadata().end() ? "{}" : it->second;
}

}  // namespace dsx::checkpoint
