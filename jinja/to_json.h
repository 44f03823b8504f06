// Python's json.dumps for template values, as transformers' tojson filter calls it: no HTML
// escaping, ensure_ascii off unless asked, indent, separators and sort_keys as Python takes them.
#pragma once

#include <optional>
#include <string>

#include "jinja/value.h"

namespace dsx::jinja {

struct JsonStyle {
  std::optional<std::string> indent;  // nullopt: one line
  std::string item_separator = ", ", key_separator = ": ";
  bool ensure_ascii = false;
  bool sort_keys = false;
};

// Error(Format) for a value JSON cannot hold (undefined, a function).
std::string to_json(const Value& value, const JsonStyle& style = {});

}  // namespace dsx::jinja
