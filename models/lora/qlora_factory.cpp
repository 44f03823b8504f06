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
#ifdef DSX_HAVE_CUDA
#include "models/lora/lora_llama_cuda.h"
#include "models/lora/nf4_device_weights.h"
#endif

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

const char* bnb_compute_dtype_name(kernels::DType dtype) {
  return dtype == kernels::DType::BF16 ? "bfloat16" : dtype == kernels::DType::F16 ? "float16" : "float32";
}

std::string bnb_4bit_config_json(const Nf4LoadOptions& options) {
  rapidjson::StringBuffer out;
  rapidjson::Writer<rapidjson::StringBuffer> w(out);
  w.StartObject();
  w.Key("load_in_4bit"), w.Bool(true);
  w.Key("bnb_4bit_quant_type"), w.String("nf4");
  w.Key("bnb_4bit_use_double_quant"), w.Bool(options.double_quant);
  w.Key("bnb_4bit_compute_dtype"), w.String(bnb_compute_dtype_name(options.compute));
  w.EndObject();
  return out.GetString();
}

Nf4LoadOptions parse_bnb_4bit_config(const std::string& json, const std::string& origin) {
  rapidjson::Document doc;
  doc.Parse(json.c_str(), json.size());
  const auto is = [&](const char* key, bool (rapidjson::Value::*test)() const) {
    return doc.IsObject() && doc.HasMember(key) && (doc[key].*test)();
  };
  if (!is("bnb_4bit_use_double_quant", &rapidjson::Value::IsBool) ||
      !is("bnb_4bit_compute_dtype", &rapidjson::Value::IsString) ||
      !is("bnb_4bit_quant_type", &rapidjson::Value::IsString) ||
      std::string(doc["bnb_4bit_quant_type"].GetString()) != "nf4")
    throw Error(ErrorKind::Format, origin + ": the QLoRA quantisation record is not an NF4 BitsAndBytesConfig "
                                            "(bnb_4bit_quant_type, bnb_4bit_use_double_quant, bnb_4bit_compute_dtype)");
  Nf4LoadOptions o;
  o.double_quant = doc["bnb_4bit_use_double_quant"].GetBool();
  o.compute = bnb_compute_dtype(doc["bnb_4bit_compute_dtype"].GetString());
  return o;
}

std::unique_ptr<LoraLlama> make_qlora_model(const ModelSource& source, const LoraConfig& lora,
                                            const Nf4LoadOptions& quantization,
                                            const ModelBuildOptions& options) {
  if (options.cuda)  // before reading gigabytes of weights
    throw Error(ErrorKind::Unsupported,
                "this QLoRA model is the CPU's (make_qlora_model_on_gpu builds the GPU's); add "
                "--device cpu (and bf16/fp16 \"enabled\": false)");
  auto frozen = std::make_unique<Nf4FrozenWeights>(
      source.shape.llama, read_nf4_base_weights(source.folder, quantization), source.folder);
  return make_lora_model(source.shape, std::move(frozen), lora, options);
}

namespace {

#ifdef DSX_HAVE_CUDA
// LoraLlamaCuda<T> over `base`, uploaded as NF4 once the model's stream exists.
template <class T>
std::unique_ptr<LoraModel> qlora_on_gpu(const ModelSource& source, const LoraConfig& lora,
                                        Nf4FrozenWeights& base, const ModelBuildOptions& o) {
  const LlamaConfig& config = source.shape.llama;
  auto upload = [&](device::Device& gpu, cudaStream_t stream) -> std::unique_ptr<ParamAccess> {
    return std::make_unique<Nf4DeviceWeights<T>>(gpu, stream, base, config.num_layers);
  };
  return std::make_unique<LoraLlamaCuda<T>>(config, lora, o.max_batch, o.max_seq,
                                            o.activation_checkpointing,
                                            /*base: nothing trains in full*/ std::vector<float>{}, upload,
                                            static_cast<cudaStream_t>(o.stream));
}
#endif

}  // namespace

std::unique_ptr<LoraModel> make_qlora_model_on_gpu(const ModelSource& source,
                                                   const LoraConfig& lora,
                                                   const Nf4LoadOptions& quantization,
                                                   const ModelBuildOptions& options) {
  if (!lora.modules_to_save.empty() || lora.bias != "none")
    throw Error(ErrorKind::Unsupported,
                "QLoRA on the GPU trains the adapters only so far: modules_to_save and "
                "bias \"all\"/\"lora_only\" train on the CPU; add --device cpu, or drop them");
#ifdef DSX_HAVE_CUDA
  // Read and validated on the host, uploaded, then let go: the host keeps no copy.
  Nf4FrozenWeights base(source.shape.llama, read_nf4_base_weights(source.folder, quantization),
                        source.folder);
  if (options.dtype == kernels::DType::F32) return qlora_on_gpu<float>(source, lora, base, options);
  if (options.dtype == kernels::DType::BF16)
    return qlora_on_gpu<__nv_bfloat16>(source, lora, base, options);
  return qlora_on_gpu<__half>(source, lora, base, options);
#else
  (void)source, (void)quantization, (void)options;
  throw Error(ErrorKind::Unsupported,
              "this dsx was built without CUDA, so QLoRA trains on the CPU only; rebuild "
              "with -DDSX_CUDA=ON, or add --device cpu");
#endif
}

}  // namespace dsx::models
