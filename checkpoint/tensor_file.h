// One checkpoint file in the safetensors format (readable by PyTorch's and Hugging Face's
// `safetensors`): u64 little-endian header length, a JSON header {name: {dtype, shape,
// data_offsets}, "__metadata__": {string: string}}, then the tensors' bytes back to back.
// dsx keeps the engine's own state as one JSON string under the metadata key "dsx".
//
// Writing streams the tensors straight from the caller's memory into a DurableFile (which
// checksums them on the way); models/io/safetensors.h's writer copies every tensor first, which
// a multi-gigabyte ZeRO partition can not afford. Reading uses models/io/safetensors.h.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "models/io/safetensors.h"

namespace dsx::checkpoint {

class DurableFile;

enum class TensorDType { F64, F32, F16, BF16, I64, I32, I16, I8, U8, BOOL };

const char* dtype_name(TensorDType dtype);  // the safetensors spelling: "F32", "BF16", ...
size_t dtype_size(TensorDType dtype);

// A tensor to write; the caller owns the bytes (numel × dtype_size of them at `data`).
struct TensorRef {
  std::string name;
  TensorDType dtype = TensorDType::F32;
  std::vector<int64_t> shape;
  const void* data = nullptr;
};

inline constexpr const char* kMetadataKey = "dsx";
inline constexpr uint64_t kMaxHeaderBytes = 100u << 20;  // as the safetensors library limits it

// Streams the file into `out`. Tensors are laid out widest dtype first (then in the given
// order) and the header padded to 8 bytes, so every tensor is aligned to its element size.
// `metadata_json` must be a JSON object (or empty for none).
void write_safetensors(DurableFile& out, std::span<const TensorRef> tensors,
                       std::string_view metadata_json);

// A checkpoint file opened for reading. Parsing is the models library's safetensors reader
// (one parser in dsx); this adds the checks a checkpoint load needs: the tensor is there, with the
// dtype and element count the engine expects.
class TensorFile {
 public:
  static TensorFile load(const std::string& path);
  // Parses a file its caller has mapped and verified: its tensors are read from that mapping.
  static TensorFile parse(models::MappedFile file);

  const std::string& origin() const { return reader_->path(); }
  std::vector<std::string> names() const;  // sorted
  bool contains(const std::string& name) const { return reader_->find(name) != nullptr; }
  const models::TensorView& view(const std::string& name) const;  // throws Format when absent
  // Copies tensor `name` into dst after checking its dtype and element count (a large tensor on
  // io_threads() threads).
  void read(const std::string& name, TensorDType dtype, void* dst, uint64_t numel) const;
  // Tensor `name`, after read()'s checks of its dtype and element count.
  const models::TensorView& checked_view(const std::string& name, TensorDType dtype,
                                         uint64_t numel) const;
  // The whole file as mapped.
  const uint8_t* file_data() const { return reader_->file().data(); }

  const std::map<std::string, std::string>& metadata() const { return reader_->metadata(); }
  std::string metadata_json() const;  // the "dsx" entry, or "{}" when absent

 private:
  std::unique_ptr<models::SafetensorsReader> reader_;
};

}  // namespace dsx::checkpoint
