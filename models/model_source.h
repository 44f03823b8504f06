// Which model a run trains, whatever its family: a preset name, a GPT-2 weights file (llm.c .bin
// or safetensors) or a Hugging Face model folder (GPT2LMHeadModel, LlamaForCausalLM,
// MistralForCausalLM, Qwen2ForCausalLM). The engine, `dsx export` and `dsx sample` hold a
// ModelShape and never name a model class; everything family-specific is dispatched here.
#pragma once

#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kernels/dtype.h"
#include "models/build_options.h"
#include "models/gpt2/config.h"
#include "models/llama/config.h"
#include "models/model.h"

namespace dsx::models {

// A model's family and hyper-parameters.
struct ModelShape {
  enum class Family { GPT2, Llama };
  Family family = Family::GPT2;
  GPT2Config gpt2;    // when family == GPT2
  LlamaConfig llama;  // when family == Llama
  int max_seq_len() const;
  int vocab_size() const;
  int hidden_size() const;
  std::string family_name() const;  // "gpt2", or config.json's model_type ("llama", "qwen2", ...)
};

// What `--model` named: the shape, the weights to start from (empty: initialise from the seed)
// and the folder it came from (its tokenizer files; "" for a preset or a single file).
struct ModelSource {
  ModelShape shape;
  std::vector<float> initial;  // fp32, the model's flat layout
  std::string folder;
};

// A preset of either family (gpt2_preset_names(), llama_preset_names()), a GPT-2 weights file or a
// Hugging Face folder. Error(Config) naming the valid presets for an unknown name; the readers'
// errors (Format, Unsupported) for a file or folder they refuse.
ModelSource load_model_source(const std::string& name_or_path);

using BuildOptions = ModelBuildOptions;
std::unique_ptr<Model> build_model(const ModelShape& shape, const BuildOptions& options);
// Whether the family has CUDA kernels: both families in a CUDA build; without CUDA, GPT-2 only
// (as before: no GPU is visible to such a build, so it never matters there).
bool has_cuda_kernels(const ModelShape& shape);
// A CPU fp32 model for sampling and evaluation on the host, whatever trained.
std::unique_ptr<Model> build_host_model(const ModelShape& shape, int max_batch, int max_seq);

// The parameters in flat-buffer order (Model::params() without building a model).
std::vector<ParamSpec> param_specs(const ModelShape& shape);

// Seeded fresh parameters in the flat layout (fp32), the same on every rank and device.
std::vector<float> initial_parameters(const ModelShape& shape, uint64_t seed);

// The shape as a JSON object, for what a checkpoint records about its run, and back.
// GPT-2: {"type": "gpt2", "max_seq_len", ...}; Llama family: {"type": "llama", "config": {the
// config.json transformers reads}}. Error(Format) naming `origin` for a description it cannot read.
void write_shape_json(rapidjson::Writer<rapidjson::StringBuffer>& w, const ModelShape& shape);
ModelShape read_shape_json(const rapidjson::Value& model, const std::string& origin);

// The weights as a Hugging Face folder: `weights_path` (model.safetensors, or shards and their
// index beside it when larger than max_shard_bytes) with config.json beside it, and the tokenizer
// files of `tokenizer_folder` ("" for none) copied there. dtype F32, BF16 (or F16 for Llama).
void write_hf_weights(const std::string& weights_path, const ModelShape& shape, const float* flat, kernels::DType dtype,
                      const std::string& tokenizer_folder = "");
// The config.json write_hf_weights writes, so a caller can refuse to replace a foreign one.
std::string hf_config_json(const ModelShape& shape, kernels::DType dtype);

}  // namespace dsx::models
