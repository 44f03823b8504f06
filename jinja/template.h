// A Jinja template as transformers renders chat templates: its environment (trim_blocks,
// lstrip_blocks, loop controls, {% generation %}), its globals (raise_exception, namespace, dict,
// range, strftime_now) and its tojson. Written for the subset chat templates use; anything else
// is refused by name when the template is read, or when rendering reaches it.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "jinja/ast.h"
#include "jinja/value.h"

namespace dsx::jinja {

struct Rendered {
  std::string text;
  // Byte ranges of `text` that {% generation %} blocks wrote (what the assistant said).
  std::vector<std::pair<size_t, size_t>> generation;
};

class Template {
 public:
  // Error(Format) "line N: ..." when the source is not a template this interpreter reads.
  explicit Template(const std::string& source);
  // Error(Format) "line N: ..." for a failed operation, or the template's raise_exception
  // message, as "raise_exception: MESSAGE".
  Rendered render(const Dict& variables) const;
  // Whether the template marks the assistant's part with {% generation %}.
  bool has_generation_blocks() const { return has_generation_; }

 private:
  Body body_;
  bool has_generation_ = false;
};

}  // namespace dsx::jinja
