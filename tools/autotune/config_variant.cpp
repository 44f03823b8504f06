// Writing experiment configs (see config_variant.h).
#include "tools/autotune/config_variant.h"

#include <rapidjson/prettywriter.h>
#include <rapidjson/reader.h>
#include <rapidjson/stringbuffer.h>

#include "dsx/error.h"
#include "config/json.h"

namespace dsx::autotune {
namespace {

// Sets obj[key] = value, in place when the key exists (keeping the file's order), else at the end.
void set_member(config::json::Value& object, const std::string& key, config::json::Value value) {
  for (auto& m : object.members) {
    if (m.key == key) {
      m.value = std::move(value);
      return;
    }
  }
  object.members.push_back({key, {}, std::move(value)});
}

config::json::Value empty_object() {
  config::json::Value v;
  v.type = config::json::Type::Object;
  return v;
}

// obj[key] as an object, created (or replacing a non-object such as `false`) when needed.
config::json::Value& object_member(config::json::Value& object, const std::string& key) {
  for (auto& m : object.members) {
    if (m.key == key) {
      if (m.value.type != config::json::Type::Object) m.value = empty_object();
      return m.value;
    }
  }
  object.members.push_back({key, {}, empty_object()});
  return object.members.back().value;
}

// rapidjson's writer quotes raw numbers; this one writes them as they were written (5e8 stays 5e8).
class NumberKeepingWriter : public rapidjson::PrettyWriter<rapidjson::StringBuffer> {
 public:
  using PrettyWriter::PrettyWriter;
  bool RawNumber(const char* text, rapidjson::SizeType length, bool) { return RawValue(text, length, rapidjson::kNumberType); }
};

// Indented JSON, numbers exactly as the user wrote them.
std::string indented(const std::string& compact) {
  rapidjson::StringBuffer out;
  NumberKeepingWriter writer(out);
  writer.SetIndent(' ', 2);
  rapidjson::StringStream in(compact.c_str());
  rapidjson::Reader reader;
  reader.Parse<rapidjson::kParseNumbersAsStringsFlag>(in, writer);
  return std::string(out.GetString()) + "\n";
}

}  // namespace

std::string config_variant(const std::string& base_text, const std::string& source, const ConfigChoice& choice,
                           const std::optional<TrialProfile>& trial) {
  config::json::Value root = config::json::parse(base_text, source);
  if (root.type != config::json::Type::Object) {
    throw Error(ErrorKind::Config, source + ": a ds_config is a JSON object ({...}), not " + config::json::type_name(root.type));
  }
  set_member(root, "train_batch_size", config::json::make_int(choice.train_batch_size));
  set_member(root, "train_micro_batch_size_per_gpu", config::json::make_int(choice.micro_batch));
  set_member(root, "gradient_accumulation_steps", config::json::make_int(choice.accumulation));
  set_member(object_member(root, "zero_optimization"), "stage", config::json::make_int(choice.stage));
  if (trial) {
    config::json::Value& tuning = object_member(root, "autotuning");
    set_member(tuning, "enabled", config::json::make_bool(true));
    set_member(tuning, "metric_path", config::json::make_string(trial->metric_path));
    set_member(tuning, "start_profile_step", config::json::make_int(trial->start_profile_step));
    set_member(tuning, "end_profile_step", config::json::make_int(trial->end_profile_step));
  }
  return indented(config::json::to_string(root));
}

}  // namespace dsx::autotune
