// Consolidated weights from a checkpoint (see export.h).
#include "engine/export.h"

#include <rapidjson/document.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

#include "dsx/error.h"
#include "checkpoint/layout.h"
#include "checkpoint/load.h"
#include "models/gpt2/config.h"
#include "models/io/gpt2_weights.h"

namespace dsx::engine {
namespace {

int member(const rapidjson::Value& obj, const char* key, const std::string& origin) {
  auto it = obj.FindMember(key);
  if (it == obj.MemberEnd() || !it->value.IsInt()) {
    throw Error(ErrorKind::Format, origin + ": the model description lacks \"" + std::string(key) +
                                       "\" (was it saved by dsx train?)");
  }
  return it->value.GetInt();
}


// The config.json written beside the export may replace only itself (a re-export): another
// file of that name - a different model's, a project's own - is never overwritten.
void refuse_foreign_config(const std::filesystem::path& path, const std::string& ours) {
  if (!std::filesystem::exists(path)) return;
  std::ifstream in(path, std::ios::binary);
  const std::string theirs((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (theirs == ours) return;
  throw Error(ErrorKind::Usage, path.string() + " exists and is not this model's config.json, which the "
                                "export writes beside the weights; export into a directory of its own "
                                "(--out DIR/model.safetensors) or move that file");
}

}  // namespace

std::string export_checkpoint(const std::string& checkpoint_dir, const std::string& tag, const std::string& out_path,
                              kernels::DType dtype) {
  const auto reader = checkpoint::CheckpointReader::open(checkpoint_dir, tag);
  const checkpoint::TensorFile states = reader.read_tensor_file(checkpoint::model_states_file_name());
  rapidjson::Document meta;
  meta.Parse(states.metadata_json().c_str());
  auto model = meta.IsObject() ? meta.FindMember("model") : meta.MemberEnd();
  if (!meta.IsObject() || model == meta.MemberEnd() || !model->value.IsObject()) {
    throw Error(ErrorKind::Format, states.origin() + ": no model description in its metadata; only checkpoints "
                                                     "written by dsx train can be exported");
  }
  models::GPT2Config c;
  c.max_seq_len = member(model->value, "max_seq_len", states.origin());
  c.vocab_size = member(model->value, "vocab_size", states.origin());
  c.padded_vocab_size = member(model->value, "padded_vocab_size", states.origin());
  c.num_layers = member(model->value, "num_layers", states.origin());
  c.num_heads = member(model->value, "num_heads", states.origin());
  c.channels = member(model->value, "channels", states.origin());
  models::validate(c);
  const auto specs = models::gpt2_param_specs(c);
  std::vector<float> flat(specs.back().offset + specs.back().numel, 0.0f);
  for (const models::ParamSpec& spec : specs) {
    states.read("module." + spec.name, checkpoint::TensorDType::F32, flat.data() + spec.offset, spec.numel);
  }
  const std::filesystem::path out(out_path);
  const std::filesystem::path config_path =
      (out.has_parent_path() ? out.parent_path() : std::filesystem::path(".")) / "config.json";
  refuse_foreign_config(config_path, models::gpt2_hf_config_json(c));
  if (out.has_parent_path()) std::filesystem::create_directories(out.parent_path());
  models::write_gpt2_safetensors(out_path, c, flat.data(), dtype);
  models::write_gpt2_hf_config(config_path, c);
  return reader.tag();
}

}  // namespace dsx::engine
