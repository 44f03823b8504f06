// Jinja's filters, tests, methods of Python's str and dict, and the globals transformers gives
// chat templates, for the values of value.h. An unknown name is an Error(Format) that names it.
#pragma once

#include <string>

#include "jinja/value.h"

namespace dsx::jinja {

Value apply_filter(const std::string& name, const Value& input, const CallArgs& args);
bool apply_test(const std::string& name, const Value& input, const CallArgs& args);
// obj.name as a bound method (str.strip, dict.items, ...); undefined when it has none by that name.
Value method_of(const Value& object, const std::string& name);
// raise_exception, namespace, dict, range, strftime_now.
Dict globals();

// Python's iteration: a list's items, a dict's keys, a string's characters; undefined: none.
List iterate(const Value& value);

}  // namespace dsx::jinja
