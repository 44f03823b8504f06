// The run's description for its checkpoints (see run_description.h).
#include "engine/run_description.h"

#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <filesystem>
#include <fstream>
#include <iterator>

namespace dsx::engine {

std::string run_description(const models::ModelSource& model, uint64_t seed, const std::string& config_path,
                            const std::string& lora_adapter_config, const std::string& quantization_config) {
  rapidjson::StringBuffer buffer;
  rapidjson::Writer<rapidjson::StringBuffer> w(buffer);
  w.StartObject();
  w.Key("model");
  models::write_shape_json(w, model.shape);
  if (!model.folder.empty()) {
    const std::string folder = std::filesystem::absolute(model.folder).lexically_normal().string();
    w.Key("source_folder"), w.String(folder.c_str(), static_cast<rapidjson::SizeType>(folder.size()));
  }
  if (!lora_adapter_config.empty()) {
    w.Key("lora");
    w.RawValue(lora_adapter_config.c_str(), lora_adapter_config.size(), rapidjson::kObjectType);
  }
  if (!quantization_config.empty()) {
    w.Key("quantization_config");
    w.RawValue(quantization_config.c_str(), quantization_config.size(), rapidjson::kObjectType);
  }
  w.Key("seed"), w.Uint64(seed);
  std::ifstream in(config_path, std::ios::binary);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  w.Key("ds_config"), w.String(text.c_str(), static_cast<rapidjson::SizeType>(text.size()));
  w.EndObject();
  return buffer.GetString();
}

}  // namespace dsx::engine
