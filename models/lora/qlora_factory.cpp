// QLoRA's model and its base (see qlora_factory.h).
#include "models/lora/qlora_factory.h"

#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "dsx/error.h"
#include "models/io/hf_folder.h"
#include "models/llama/hf_config.h"
#include "models/lora/lora_factory.h"
#include "models/lora/nf4_frozen_weights.h"

namespace dsx::models {

namespace {

// config.json without its quantization_config, which read_nf4_base_weights honours (the plain
// reader refuses it, rightly, for a model it would load dense).
LlamaConfig config_without_quantization(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  rapidjson::Document doc;
  doc.Parse(text.str().c_str());
  if (doc.HasParseError() || !doc.IsObject())
    return read_llama_hf_config(path).config;  // its own error
  doc.RemoveMember("quantization_config");
  rapidjson::StringBuffer out;
  rapidjson::Writer<rapidjson::StringBuffer> writer(out);
  doc.Accept(writer);
  return parse_llama_hf_config(out.GetString(), path).config;
}

}  // namespace

bool wants_qlora(const std::string& model, bool load_in_4bit) {
  return load_in_4bit || (std::filesystem::is_directory(model) && hf_folder_is_bnb_4bit(model));
}

ModelSource qlora_model_source(const std::string& dir) {
  if (!std::filesystem::is_directory(dir) || !hf_folder_is_llama_family(dir))
    throw Error(ErrorKind::Usage,
                "--model '" + dir +
                    "': QLoRA quantises a Hugging Face Llama-family folder (Llama, Mistral, "
                    "Qwen2) to NF4; name such a folder, or drop --load-in-4bit for LoRA");
  ModelSource m;
  m.folder = dir;
  m.shape.family = ModelShape::Family::Llama;
  m.shape.llama = config_without_quantization(dir + "/config.json");
  return m;
}

kernels::DType bnb_compute_dtype(const std::string& name) {
  if (name == "bfloat16") return kernels::DType::BF16;
  if (name == "float16") return kernels::DType::F16;
  if (name == "float32") return kernels::DType::F32;
  throw Error(ErrorKind::Usage, "--bnb-4bit-compute-dtype '" + name +
                                    "': use bfloat16, float16 or float32 (as BitsAndBytesConfig)");
}

std::unique_ptr<LoraLlama> make_qlora_model(const ModelSource& source, const LoraConfig& lora,
                                            const Nf4LoadOptions& quantization,
                                            const ModelBuildOptions& options) {
  if (options.cuda)  // before reading gigabytes of weights
    throw Error(ErrorKind::Unsupported,
                "QLoRA (an NF4 base) runs on the CPU so far; add --device cpu (and bf16/fp16 "
                "\"enabled\": false)");
  auto frozen = std::make_unique<Nf4FrozenWeights>(
      source.shape.llama, read_nf4_base_weights(source.folder, quantization), source.folder);
  return make_lora_model(source.shape, std::move(frozen), lora, options);
}

}  // namespace dsx::models
