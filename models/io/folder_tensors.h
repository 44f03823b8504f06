// Every tensor of a Hugging Face folder's weights, whether one model.safetensors or shards listed
// by model.safetensors.index.json, each with the file it lies in. The files are memory-mapped,
// not read. Error(Io) for a folder with neither file or a missing shard, Error(Format) for an
// index that is not one or a shard without the tensor the index puts there.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "models/io/safetensors.h"

namespace dsx::models {

inline constexpr const char* kSingleFile = "model.safetensors";
inline constexpr const char* kIndexFile = "model.safetensors.index.json";

struct Located {
  const TensorView* view;
  const std::string* file;
};

class FolderTensors {
 public:
  explicit FolderTensors(const std::string& dir);
  const std::map<std::string, Located>& tensors() const { return tensors_; }
  const Located* find(const std::string& name) const;

 private:
  const SafetensorsReader& open(const std::string& path);
  void read_index(const std::string& dir, const std::string& index);

  std::map<std::string, std::unique_ptr<SafetensorsReader>> readers_;
  std::map<std::string, Located> tensors_;
};

}  // namespace dsx::models
