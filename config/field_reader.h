// The machinery that turns one JSON object of a ds_config into typed fields: pydantic's lax
// coercions (ints from 5e8 or "500", bools from 0/1/"yes"), ranges, enumerations, aliases,
// "auto", provenance, and unknown keys (an error in DeepSpeed's strict blocks, a warning with
// the closest valid key elsewhere). Errors are collected, not thrown one by one, so a user sees
// every problem of a file at once. The per-block field lists are in fields.h.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "config/ds_config.h"
#include "config/json.h"

namespace dsx::config::detail {

// Constraints of one field beyond its C++ type.
struct Spec {
  const char* alias = nullptr;     // DeepSpeed's other accepted name (stage3_* long forms)
  std::optional<double> min;       // inclusive, or exclusive with min_exclusive
  std::optional<double> max;       // inclusive
  bool min_exclusive = false;
  std::vector<std::string> choices;  // allowed strings
  bool ignore_case = false;          // choices match in any case; the canonical spelling is stored
  std::optional<size_t> items;       // a list of exactly this many values
  const char* items_named = "";      // what they are, for the error: "(beta1, beta2)"
};

// How DeepSpeed treats a block's unknown keys and "auto" values:
//   Forbid  pydantic blocks: unknown keys are errors; "auto" is dropped (= the default)
//   Kwargs  optimizer/scheduler params, passed as constructor arguments: unknown keys are
//           errors (TypeError); "auto" is not understood
//   Warn    plain dicts and the top level: unknown keys are ignored (dsx warns); "auto" is not
//           understood
enum class Extra { Forbid, Kwargs, Warn };

// What an "auto" value becomes.
// Hugging Face fills some "auto" keys from its command line; DeepSpeed's strict blocks drop the
// rest (= the field's default); anywhere else DeepSpeed cannot use "auto" at all.
struct AutoResolution {
  enum Kind { Resolved, NeedsInput, NoRule } kind = NoRule;
  json::Value value;  // Resolved: the value
  std::string note;   // Resolved: where it came from; NeedsInput: which flag to pass
};

class ReadContext {
 public:
  ReadContext(std::string source, const ConfigInputs& inputs, EngineConfig& config)
      : source(std::move(source)), inputs(inputs), config(config) {}

  void error(const std::string& path, json::Position pos, const std::string& message);
  void warn(const std::string& path, json::Position pos, const std::string& message);
  void record(const std::string& path, Source source, json::Position pos, std::string note = {});
  std::string where(json::Position pos) const;  // "file:line:col" or "file"
  bool has_errors() const { return !errors.empty(); }
  [[noreturn]] void throw_errors() const;

  std::string source;
  const ConfigInputs& inputs;
  EngineConfig& config;
  std::vector<std::string> errors;
  // Set by the reader: how "auto" at a path resolves (Hugging Face's rules).
  std::function<AutoResolution(const std::string& path)> resolve_auto;
};

// Reads the fields of one JSON object. `object` may be null (block absent: all defaults).
class BlockReader {
 public:
  BlockReader(ReadContext& ctx, const json::Value* object, std::string prefix, Extra extra)
      : ctx(ctx), object_(object), prefix_(std::move(prefix)), extra_(extra) {}

  // Reads `key` (or spec.alias) into `out` if present; leaves the default otherwise.
  // Returns true when the file set it (including a resolved "auto").
  template <class T>
  bool field(const char* key, T& out, const Spec& spec = {});

  // Marks `key` as known and returns its member (nullptr if absent); for nested blocks and
  // keys read by hand.
  const json::Member* take(const char* key);
  // Keys DeepSpeed knows here that dsx keeps or ignores on purpose.
  void known(std::initializer_list<const char*> keys);
  // Reports every key that no field(), take() or known() named.
  void finish();

  std::string path(const char* key) const { return prefix_.empty() ? key : prefix_ + "." + key; }
  bool present(const char* key) const { return object_ && object_->find(key); }
  const json::Value* object() const { return object_; }

  ReadContext& ctx;

 private:
  // Finds key or alias; reports both-given. Returns nullptr when absent.
  const json::Member* lookup(const char* key, const Spec& spec);
  // For "auto": the value to convert instead, or nullptr (keep the default).
  const json::Value* resolve_auto(const std::string& path, const json::Member& m, json::Value& storage);

  const json::Value* object_;
  std::string prefix_;
  Extra extra_;
  std::vector<std::string> known_;
};

// ---- conversions (pydantic lax mode). Each returns false and sets `why` ("expected ..., write
// ...") when the value does not fit.
bool convert(const json::Value& v, bool& out, const Spec& spec, std::string& why);
bool convert(const json::Value& v, int64_t& out, const Spec& spec, std::string& why);
bool convert(const json::Value& v, double& out, const Spec& spec, std::string& why);
bool convert(const json::Value& v, std::string& out, const Spec& spec, std::string& why);
bool convert(const json::Value& v, std::vector<double>& out, const Spec& spec, std::string& why);
bool convert(const json::Value& v, std::vector<int64_t>& out, const Spec& spec, std::string& why);
bool convert(const json::Value& v, std::vector<std::string>& out, const Spec& spec, std::string& why);
bool convert(const json::Value& v, json::Value& out, const Spec& spec, std::string& why);

template <class T>
bool convert(const json::Value& v, std::optional<T>& out, const Spec& spec, std::string& why) {
  if (v.is_null()) {
    out.reset();
    return true;
  }
  T value{};
  if (!convert(v, value, spec, why)) return false;
  out = std::move(value);
  return true;
}

template <class T>
bool BlockReader::field(const char* key, T& out, const Spec& spec) {
  known_.push_back(key);
  if (spec.alias) known_.push_back(spec.alias);
  const json::Member* m = lookup(key, spec);
  if (!m) return false;
  const std::string p = path(key);
  json::Value resolved;
  const json::Value* v = &m->value;
  if constexpr (!std::is_same_v<T, json::Value>) {  // raw values are kept as written, "auto" too
    if (v->is_string("auto")) {
      v = resolve_auto(p, *m, resolved);
      if (!v) return false;
    }
  }
  std::string why;
  T value = out;
  if (!convert(*v, value, spec, why)) {
    ctx.error(p, m->value.pos, why);
    return false;
  }
  out = std::move(value);
  if (v == &m->value) ctx.record(p, Source::File, m->value.pos);
  return true;
}

}  // namespace dsx::config::detail
