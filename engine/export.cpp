// Consolidated weights from a checkpoint (see export.h).
#include "engine/export.h"

#include <rapidjson/document.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

#include "dsx/error.h"
#include "dsx/json_input.h"
#include "checkpoint/layout.h"
#include "checkpoint/load.h"
#include "models/model_source.h"

namespace dsx::engine {
namespace {

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
  const checkpoint::TensorFile states = reader.read_tensor_file(reader.model_states_file());
  const rapidjson::Document meta = parse_json(states.metadata_json(), states.origin() + "'s metadata");
  auto model = meta.IsObject() ? meta.FindMember("model") : meta.MemberEnd();
  if (!meta.IsObject() || model == meta.MemberEnd() || !model->value.IsObject()) {
    throw Error(ErrorKind::Format, states.origin() + ": no model description in its metadata; only checkpoints "
                                                     "written by dsx train can be exported");
  }
  const models::ModelShape shape = models::read_shape_json(model->value, states.origin());
  const auto specs = models::param_specs(shape);
  std::vector<float> flat(specs.back().offset + specs.back().numel, 0.0f);
  for (const models::ParamSpec& spec : specs) {
    states.read("module." + spec.name, checkpoint::TensorDType::F32, flat.data() + spec.offset, spec.numel);
  }
  // The tokenizer files of the folder the run started from go beside the weights, when it still exists.
  auto source = meta.FindMember("source_folder");
  std::string tokenizer_folder;
  if (source != meta.MemberEnd() && source->value.IsString() && std::filesystem::is_directory(source->value.GetString())) {
    tokenizer_folder = source->value.GetString();
  }
  const std::filesystem::path out(out_path);
  const std::filesystem::path config_path =
      (out.has_parent_path() ? out.parent_path() : std::filesystem::path(".")) / "config.json";
  refuse_foreign_config(config_path, models::hf_config_json(shape, dtype));
  if (out.has_parent_path()) std::filesystem::create_directories(out.parent_path());
  models::write_hf_weights(out_path, shape, flat.data(), dtype, tokenizer_folder);
  return reader.tag();
}

}  // namespace dsx::engine
