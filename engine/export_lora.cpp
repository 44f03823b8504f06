// LoRA checkpoints out (see export_lora.h).
#include "engine/export_lora.h"

#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <algorithm>
#include <filesystem>
#include <optional>
#include <vector>

#include "checkpoint/layout.h"
#include "checkpoint/load.h"
#include "dsx/error.h"
#include "dsx/json_input.h"
#include "models/io/hf_folder.h"
#include "models/lora/lora_adapters.h"
#include "models/lora/lora_llama.h"
#include "models/lora/lora_merge.h"
#include "models/lora/nf4_frozen_weights.h"
#include "models/lora/qlora_factory.h"
#include "models/lora/peft_adapter.h"
#include "models/model_source.h"

namespace dsx::engine {
namespace {

struct LoraCheckpoint {
  std::string tag, origin, source_folder;
  models::ModelShape shape;
  models::LoraConfig lora;
  std::vector<models::ParamSpec> specs;  // the adapters', then the base tensors trained in full
  size_t adapter_specs = 0;               // how many of specs are adapters
  models::TrainedBaseTensors trained;
  std::vector<float> adapters;
  std::optional<models::Nf4LoadOptions> quantized_at_load;  // QLoRA with --load-in-4bit
};

rapidjson::Document checkpoint_metadata(const checkpoint::TensorFile& states) {
  return parse_json(states.metadata_json(), states.origin() + "'s metadata");
}

LoraCheckpoint read_lora_checkpoint(const std::string& dir, const std::string& tag) {
  const auto reader = checkpoint::CheckpointReader::open(dir, tag);
  const checkpoint::TensorFile states = reader.read_tensor_file(reader.model_states_file());
  const rapidjson::Document meta = checkpoint_metadata(states);
  LoraCheckpoint c;
  c.tag = reader.tag(), c.origin = states.origin();
  const auto lora = meta.IsObject() ? meta.FindMember("lora") : meta.MemberEnd();
  const auto model = meta.IsObject() ? meta.FindMember("model") : meta.MemberEnd();
  if (lora == meta.MemberEnd() || model == meta.MemberEnd())
    throw Error(ErrorKind::Usage, c.origin + " is not a LoRA run's checkpoint (no \"lora\" in its metadata); export "
                                             "it with --out");
  rapidjson::StringBuffer text;
  rapidjson::Writer<rapidjson::StringBuffer> w(text);
  lora->value.Accept(w);
  c.lora = models::parse_peft_adapter_config(text.GetString(), c.origin + " (its LoRA config)");
  c.shape = models::read_shape_json(model->value, c.origin);
  if (c.shape.family == models::ModelShape::Family::GPT2) {
    c.specs = models::LoraAdapters(c.shape.gpt2, c.lora, 1, 1).specs();
    c.adapter_specs = c.specs.size();
  } else {
    const models::LoraAdapters adapters(c.shape.llama, c.lora, 1, 1);
    c.specs = adapters.specs();
    c.adapter_specs = c.specs.size();
    c.trained = models::lora_llama_trained_base(c.shape.llama, adapters);
  }
  c.specs.insert(c.specs.end(), c.trained.specs.begin(), c.trained.specs.end());
  c.adapters.assign(c.specs.empty() ? 0 : c.specs.back().offset + c.specs.back().numel, 0.0f);
  for (const auto& spec : c.specs)
    states.read("module." + spec.name, checkpoint::TensorDType::F32, c.adapters.data() + spec.offset, spec.numel);
  if (const auto q = meta.FindMember("quantization_config"); q != meta.MemberEnd()) {
    rapidjson::StringBuffer json;
    rapidjson::Writer<rapidjson::StringBuffer> qw(json);
    q->value.Accept(qw);
    c.quantized_at_load = models::parse_bnb_4bit_config(json.GetString(), c.origin);
  }
  const auto source = meta.FindMember("source_folder");
  if (source != meta.MemberEnd() && source->value.IsString()) c.source_folder = source->value.GetString();
  return c;
}

// The base the adapters trained on, in llama_param_specs' layout: a QLoRA base (a bitsandbytes
// 4-bit folder, or a folder quantised at load) dequantised as the model computed with it, as
// PEFT's merge_and_unload dequantises a 4-bit weight before adding the adapter; else the folder's.
std::vector<float> trained_base(const LoraCheckpoint& c) {
  if (!c.quantized_at_load && !models::hf_folder_is_bnb_4bit(c.source_folder))
    return models::read_llama_hf_folder(c.source_folder).params;
  const models::ModelSource source = models::qlora_model_source(c.source_folder);
  // A bitsandbytes folder carries its own quantisation; the options apply to quantising at load.
  const models::Nf4LoadOptions options = c.quantized_at_load.value_or(models::Nf4LoadOptions{});
  const models::Nf4FrozenWeights base(source.shape.llama, models::read_nf4_base_weights(c.source_folder, options),
                                      c.source_folder);
  return base.dequantised();
}

}  // namespace

bool is_lora_checkpoint(const std::string& checkpoint_dir, const std::string& tag) {
  const auto reader = checkpoint::CheckpointReader::open(checkpoint_dir, tag);
  const rapidjson::Document meta = checkpoint_metadata(reader.read_tensor_file(reader.model_states_file()));
  return meta.IsObject() && meta.HasMember("lora");
}

std::string export_lora_adapter(const std::string& checkpoint_dir, const std::string& tag, const std::string& out_dir) {
  const LoraCheckpoint c = read_lora_checkpoint(checkpoint_dir, tag);
  std::filesystem::create_directories(out_dir);
  models::write_peft_adapter(out_dir, c.lora, c.source_folder, c.specs, c.adapters.data());
  return c.tag;
}

std::string export_lora_merged(const std::string& checkpoint_dir, const std::string& tag, const std::string& out_path,
                               kernels::DType dtype) {
  const LoraCheckpoint c = read_lora_checkpoint(checkpoint_dir, tag);
  if (c.shape.family != models::ModelShape::Family::Llama)
    throw Error(ErrorKind::Unsupported, c.origin + ": dsx export --merged merges Llama-family adapters only so far; "
                                                   "export this GPT-2 adapter with --peft and merge it with PEFT's "
                                                   "merge_and_unload()");
  if (c.source_folder.empty() || !std::filesystem::is_directory(c.source_folder))
    throw Error(ErrorKind::Io, c.origin + ": the base model folder the run started from ('" + c.source_folder +
                                   "') is gone, and a merged export needs its weights; export the adapter with --peft");
  const std::filesystem::path out(out_path);
  std::error_code ec;
  if (std::filesystem::equivalent(out.has_parent_path() ? out.parent_path() : ".", c.source_folder, ec))
    throw Error(ErrorKind::Usage, "dsx export --merged: " + out_path + " is in the base model's folder " +
                                      c.source_folder + ", whose weights it would replace; export into another folder");
  std::vector<float> base = trained_base(c);
  const auto base_specs = models::llama_param_specs(c.shape.llama);
  if (base_specs.empty() || base.size() != base_specs.back().offset + base_specs.back().numel)
    throw Error(ErrorKind::Format, c.origin + ": the base model in " + c.source_folder +
                                       " is not the shape the run trained (config.json changed?)");
  const std::vector<models::ParamSpec> adapter_specs(c.specs.begin(), c.specs.begin() + c.adapter_specs);
  models::merge_lora_adapters(base_specs, base.data(), adapter_specs, c.adapters.data(), c.lora.scaling());
  for (size_t i = 0; i < c.trained.specs.size(); ++i) {  // modules_to_save and biases replace the base's
    const models::ParamSpec& t = c.trained.specs[i];
    std::copy_n(c.adapters.data() + t.offset, t.numel, base.data() + base_specs[c.trained.base_index[i]].offset);
  }
  if (out.has_parent_path()) std::filesystem::create_directories(out.parent_path());
  models::write_hf_weights(out_path, c.shape, base.data(), dtype, c.source_folder);
  return c.tag;
}

}  // namespace dsx::engine
