// The tensors of a Hugging Face weights folder (see folder_tensors.h).
#include "models/io/folder_tensors.h"

#include <rapidjson/document.h>

#include <filesystem>

#include "dsx/error.h"
#include "dsx/json_input.h"
#include "models/io/files.h"

namespace dsx::models {

namespace fs = std::filesystem;

namespace {
[[noreturn]] void bad(const std::string& file, const std::string& what) {
  throw Error(ErrorKind::Format, "'" + file + "': " + what);
}
}  // namespace

FolderTensors::FolderTensors(const std::string& dir) {
  const std::string index = dir + "/" + kIndexFile, single = dir + "/" + kSingleFile;
  if (fs::exists(single)) {  // first, as transformers looks for it first
    const SafetensorsReader& r = open(single);
    for (const auto& [name, view] : r.tensors()) tensors_[name] = {&view, &r.path()};
  } else if (fs::exists(index)) {
    read_index(dir, index);
  } else {
    throw Error(ErrorKind::Io, "'" + dir + "' has neither " + kSingleFile + " nor " + kIndexFile +
                                   "; dsx reads safetensors weights (save with transformers' "
                                   "save_pretrained(safe_serialization=True))");
  }
}

const Located* FolderTensors::find(const std::string& name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second;
}

const SafetensorsReader& FolderTensors::open(const std::string& path) {
  auto& slot = readers_[path];
  if (!slot) slot = std::make_unique<SafetensorsReader>(path);  // memory-mapped, not read
  return *slot;
}

// Only weight_map is trusted, as transformers does: a shard's other tensors are not looked at.
void FolderTensors::read_index(const std::string& dir, const std::string& index) {
  const rapidjson::Document doc =
      parse_json(read_text_file(index, "the sharded weights need their index"), index);
  if (!doc.IsObject() || !doc.HasMember("weight_map") || !doc["weight_map"].IsObject())
    bad(index, "not a safetensors index (a JSON object with a weight_map object)");
  for (const auto& m : doc["weight_map"].GetObject()) {
    const std::string name = m.name.GetString();
    if (!m.value.IsString()) bad(index, "weight_map entry '" + name + "' is not a file name");
    const std::string shard = dir + "/" + m.value.GetString();
    if (!fs::exists(shard))
      throw Error(ErrorKind::Io, "shard '" + shard + "' (listed in '" + index + "' for tensor '" +
                                     name + "') is missing; copy the whole model folder");
    const SafetensorsReader& r = open(shard);
    const TensorView* t = r.find(name);
    if (!t) bad(shard, "does not hold tensor '" + name + "', which '" + index + "' puts there");
    tensors_[name] = {t, &r.path()};
  }
}

}  // namespace dsx::models
