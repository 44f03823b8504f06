// Conversions with pydantic's lax rules, and the bookkeeping of one block: lookups, aliases,
// "auto", provenance, unknown keys.
#include "config/field_reader.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>

#include "dsx/error.h"
#include "config/closest_key.h"

namespace dsx::config::detail {

// ---- context ----------------------------------------------------------------------------------
std::string ReadContext::where(json::Position pos) const {
  if (pos.line == 0) return source;
  return source + ":" + std::to_string(pos.line) + ":" + std::to_string(pos.column);
}

void ReadContext::error(const std::string& path, json::Position pos, const std::string& message) {
  errors.push_back(where(pos) + ": " + (path.empty() ? "" : path + ": ") + message);
}

void ReadContext::warn(const std::string& path, json::Position pos, const std::string& message) {
  config.warnings.push_back(Diagnostic{path, pos, message});
}

void ReadContext::record(const std::string& path, Source src, json::Position pos, std::string note) {
  config.origins[path] = Origin{src, pos, std::move(note)};
}

void ReadContext::throw_errors() const {
  std::string message;
  if (errors.size() == 1) {
    message = errors[0];
  } else {
    message = std::to_string(errors.size()) + " problems in " + source + ":";
    for (const auto& e : errors) message += "\n  " + e;
  }
  throw Error(ErrorKind::Config, message);
}

// ---- conversions ------------------------------------------------------------------------------
namespace {

std::string shown(const json::Value& v) {
  std::string s = json::to_string(v);
  if (s.size() > 60) s = s.substr(0, 57) + "...";
  return s;
}

bool integer_literal(const std::string& text) { return text.find_first_of(".eE") == std::string::npos; }

bool check_range(double x, const Spec& spec, const std::string& text, std::string& why) {
  auto fmt = [](double d) {
    char buf[32];
    auto [end, ec] = std::to_chars(buf, buf + sizeof buf, d);
    return std::string(buf, end);
  };
  if (spec.min && (spec.min_exclusive ? x <= *spec.min : x < *spec.min)) {
    why = "must be " + std::string(spec.min_exclusive ? "greater than " : "at least ") + fmt(*spec.min) +
          ", got " + text;
    return false;
  }
  if (spec.max && x > *spec.max) {
    why = "must be at most " + fmt(*spec.max) + ", got " + text;
    return false;
  }
  return true;
}

bool parse_int_string(std::string_view s, int64_t& out) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  if (!s.empty() && s.front() == '+') s.remove_prefix(1);
  if (s.empty()) return false;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && end == s.data() + s.size();
}

}  // namespace

bool convert(const json::Value& v, bool& out, const Spec&, std::string& why) {
  static const char* const kTrue[] = {"true", "yes", "on", "1", "t", "y"};
  static const char* const kFalse[] = {"false", "no", "off", "0", "f", "n"};
  switch (v.type) {
    case json::Type::Bool: out = v.boolean; return true;
    case json::Type::Number:
      if (v.text == "0" || v.text == "1") {
        out = v.text == "1";
        return true;
      }
      break;
    case json::Type::String: {
      std::string lower = v.text;
      for (auto& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      for (const char* t : kTrue)
        if (lower == t) return out = true, true;
      for (const char* f : kFalse)
        if (lower == f) return out = false, true;
      break;
    }
    default: break;
  }
  why = "expected true or false, got " + shown(v) + ". Write true or false.";
  return false;
}

bool convert(const json::Value& v, int64_t& out, const Spec& spec, std::string& why) {
  switch (v.type) {
    case json::Type::Bool: out = v.boolean ? 1 : 0; break;
    case json::Type::Number:
      if (integer_literal(v.text)) {
        auto [end, ec] = std::from_chars(v.text.data(), v.text.data() + v.text.size(), out);
        if (ec != std::errc() || end != v.text.data() + v.text.size()) {
          why = "the whole number " + shown(v) + " is too large (the limit is 2^63-1).";
          return false;
        }
      } else {
        double d = v.number;
        if (!std::isfinite(d) || std::fabs(d) >= 9.2233720368547758e18) {
          why = "the number " + shown(v) + " is too large for a whole number (the limit is 2^63-1).";
          return false;
        }
        if (d != std::floor(d)) {
          why = "expected a whole number, got " + shown(v) +
                " (DeepSpeed rejects fractional values too). Round it, e.g. " +
                std::to_string(static_cast<long long>(std::floor(d))) + ".";
          return false;
        }
        out = static_cast<int64_t>(d);
      }
      break;
    case json::Type::String:
      if (parse_int_string(v.text, out)) break;
      why = "expected a whole number, got the string " + shown(v) +
            ". Write it as a JSON number without quotes (5e8 is accepted).";
      return false;
    default:
      why = std::string("expected a whole number, got ") + json::type_name(v.type) + " " + shown(v) + ".";
      return false;
  }
  return check_range(static_cast<double>(out), spec, std::to_string(out), why);
}

bool convert(const json::Value& v, double& out, const Spec& spec, std::string& why) {
  switch (v.type) {
    case json::Type::Number: out = v.number; break;
    case json::Type::String: {
      const char* begin = v.text.c_str();
      char* end = nullptr;
      out = std::strtod(begin, &end);
      if (v.text.empty() || end != begin + v.text.size()) {
        why = "expected a number, got the string " + shown(v) + ". Write it without quotes.";
        return false;
      }
      break;
    }
    default:
      why = std::string("expected a number, got ") + json::type_name(v.type) + " " + shown(v) + ".";
      return false;
  }
  if (!std::isfinite(out)) {
    why = "the number " + shown(v) + " is out of range; write a finite number.";
    return false;
  }
  return check_range(out, spec, v.type == json::Type::Number ? v.text : shown(v), why);
}

bool convert(const json::Value& v, std::string& out, const Spec& spec, std::string& why) {
  auto expected = [&] {
    std::string list;
    for (size_t i = 0; i < spec.choices.size(); ++i) list += (i ? ", \"" : "\"") + spec.choices[i] + "\"";
    return "one of " + list + (spec.ignore_case ? " (any case)" : " (case-sensitive)");
  };
  if (v.type != json::Type::String) {
    why = std::string("expected ") + (spec.choices.empty() ? "a string" : expected()) + ", got " +
          json::type_name(v.type) + " " + shown(v) + ".";
    return false;
  }
  if (spec.choices.empty()) {
    out = v.text;
    return true;
  }
  for (const auto& choice : spec.choices) {
    bool same = spec.ignore_case ? edit_distance(choice, v.text) == 0 && choice.size() == v.text.size()
                                 : choice == v.text;
    if (same) {
      out = choice;
      return true;
    }
  }
  why = "expected " + expected() + ", got " + shown(v) + ".";
  if (auto near = closest_key(v.text, spec.choices)) why += " Did you mean \"" + *near + "\"?";
  return false;
}

namespace {

template <class T>
bool convert_list(const json::Value& v, std::vector<T>& out, const Spec& spec, std::string& why) {
  if (v.type != json::Type::Array) {
    why = std::string("expected a list, got ") + json::type_name(v.type) + " " + shown(v) + ".";
    return false;
  }
  if (spec.items && v.items.size() != *spec.items) {
    why = "expected " + std::to_string(*spec.items) + " values " + spec.items_named + ", got " +
          std::to_string(v.items.size()) + ".";
    return false;
  }
  std::vector<T> result;
  for (size_t i = 0; i < v.items.size(); ++i) {
    T item{};
    if (!convert(v.items[i], item, spec, why)) {
      why = "item " + std::to_string(i) + ": " + why;
      return false;
    }
    result.push_back(std::move(item));
  }
  out = std::move(result);
  return true;
}

}  // namespace

bool convert(const json::Value& v, std::vector<double>& out, const Spec& spec, std::string& why) {
  return convert_list(v, out, spec, why);
}
bool convert(const json::Value& v, std::vector<int64_t>& out, const Spec& spec, std::string& why) {
  return convert_list(v, out, spec, why);
}
bool convert(const json::Value& v, std::vector<std::string>& out, const Spec& spec, std::string& why) {
  return convert_list(v, out, spec, why);
}
bool convert(const json::Value& v, json::Value& out, const Spec&, std::string&) {
  out = v;
  return true;
}

// ---- one block --------------------------------------------------------------------------------
const json::Member* BlockReader::lookup(const char* key, const Spec& spec) {
  if (!object_) return nullptr;
  const json::Member* m = object_->find_member(key);
  if (spec.alias) {
    const json::Member* a = object_->find_member(spec.alias);
    if (m && a) {
      ctx.error(path(key), a->key_pos,
                std::string("both '") + key + "' and its other name '" + spec.alias +
                    "' are given; they are the same setting. Keep one.");
    }
    if (!m) m = a;
  }
  return m;
}

const json::Value* BlockReader::resolve_auto(const std::string& p, const json::Member& m,
                                             json::Value& storage) {
  AutoResolution r = ctx.resolve_auto ? ctx.resolve_auto(p) : AutoResolution{};
  if (r.kind == AutoResolution::Resolved) {
    storage = r.value;
    storage.pos = m.value.pos;
    ctx.record(p, Source::Auto, m.value.pos, r.note);
    return &storage;
  }
  if (extra_ == Extra::Forbid) {  // DeepSpeed's strict blocks drop "auto": the default applies
    ctx.record(p, Source::Default, m.value.pos, "\"auto\" = DeepSpeed's default");
    if (r.kind == AutoResolution::NeedsInput) {
      ctx.warn(p, m.value.pos,
               "\"auto\" kept DeepSpeed's default; pass " + r.note + " to resolve it as Hugging Face does.");
    }
    return nullptr;
  }
  if (r.kind == AutoResolution::NeedsInput) {
    ctx.error(p, m.value.pos, "is \"auto\", which needs " + r.note + " to resolve. Pass it, or write a value.");
  } else {
    ctx.error(p, m.value.pos,
              "\"auto\" is not understood here (neither DeepSpeed nor Hugging Face fill this key). "
              "Write a value.");
  }
  return nullptr;
}

const json::Member* BlockReader::take(const char* key) {
  known_.push_back(key);
  return object_ ? object_->find_member(key) : nullptr;
}

void BlockReader::known(std::initializer_list<const char*> keys) {
  for (const char* k : keys) known_.push_back(k);
}

void BlockReader::finish() {
  if (!object_) return;
  for (const auto& m : object_->members) {
    if (std::find(known_.begin(), known_.end(), m.key) != known_.end()) continue;
    std::string where = prefix_.empty() ? "at the top level" : "in " + prefix_;
    std::string shown_key = m.key.size() > 80 ? m.key.substr(0, 77) + "..." : m.key;
    std::string message = "unknown key '" + shown_key + "' " + where;
    auto near = closest_key(m.key, known_);
    if (extra_ != Extra::Warn) {
      message += extra_ == Extra::Forbid ? " (DeepSpeed rejects it too)."
                                         : " (DeepSpeed passes params to the constructor, which rejects it).";
      message += near ? " Did you mean '" + *near + "'?" : " Remove it.";
      ctx.error(path(shown_key.c_str()), m.key_pos, message);
    } else {
      message += "; DeepSpeed ignores it, and so does dsx.";
      if (near) message += " Did you mean '" + *near + "'?";
      ctx.warn(path(shown_key.c_str()), m.key_pos, message);
    }
  }
}

}  // namespace dsx::config::detail
