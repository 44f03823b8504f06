// The safetensors format (Hugging Face): an 8-byte little-endian header length H, H bytes of JSON
// {name: {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {str: str}}, then the
// tensor bytes (offsets relative to the end of the header). Generic reader and writer; the
// GPT-2 naming lives in gpt2_weights.h. Every malformed header or offset is an Error(Format)
// that names the file and the tensor.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "models/io/files.h"

namespace dsx::models {

struct TensorView {
  std::string dtype;            // "F32", "BF16", "F16", "I32", ...
  std::vector<int64_t> shape;
  const uint8_t* data = nullptr;
  size_t bytes = 0;
  size_t numel() const;
};

size_t safetensors_dtype_size(const std::string& dtype);  // 0 for an unknown dtype

class SafetensorsReader {
 public:
  explicit SafetensorsReader(const std::string& path);
  // Parses a file its caller has mapped (and, e.g., checksummed) already.
  explicit SafetensorsReader(MappedFile file);
  const std::string& path() const { return file_.path(); }
  const MappedFile& file() const { return file_; }
  const std::map<std::string, TensorView>& tensors() const { return tensors_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  // nullptr when absent.
  const TensorView* find(const std::string& name) const;

 private:
  MappedFile file_;
  std::map<std::string, TensorView> tensors_;
  std::map<std::string, std::string> metadata_;
};

class SafetensorsWriter {
 public:
  // The bytes are copied; tensors are written in the order added.
  void add(const std::string& name, const std::string& dtype, const std::vector<int64_t>& shape,
           const void* data, size_t bytes);
  void set_metadata(const std::string& key, const std::string& value) { metadata_[key] = value; }
  void write(const std::string& path) const;  // atomically

 private:
  struct Entry {
    std::string name, dtype;
    std::vector<int64_t> shape;
    std::vector<uint8_t> bytes;
  };
  std::vector<Entry> entries_;
  std::map<std::string, std::string> metadata_;
};

}  // namespace dsx::models
