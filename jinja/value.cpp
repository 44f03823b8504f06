// Python's semantics for the values of a template (see value.h).
#include "jinja/value.h"

#include <charconv>
#include <cmath>
#include <cstdio>

#include "dsx/error.h"

namespace dsx::jinja {

const Value* Dict::find(std::string_view key) const {
  for (const auto& [k, v] : items) {
    if (k == key) return &v;
  }
  return nullptr;
}

void Dict::set(const std::string& key, Value value) {
  for (auto& [k, v] : items) {
    if (k == key) {
      v = std::move(value);
      return;
    }
  }
  items.emplace_back(key, std::move(value));
}

const Value& CallArgs::get(size_t index, std::string_view name) const {
  static const Value undefined;
  if (index < positional.size()) return positional[index];
  for (const auto& [k, v] : named) {
    if (k == name) return v;
  }
  return undefined;
}

Value Value::none() {
  Value v;
  v.kind_ = Kind::None;
  return v;
}

Value Value::namespace_of(Dict attributes) {
  Value v(std::move(attributes));
  v.namespace_ = true;
  return v;
}

Value::Value(std::string s)
    : kind_(Kind::String), string_(std::make_shared<const std::string>(std::move(s))) {}
Value::Value(List list) : kind_(Kind::List), list_(std::make_shared<List>(std::move(list))) {}
Value::Value(Dict dict) : kind_(Kind::Dict), dict_(std::make_shared<Dict>(std::move(dict))) {}
Value::Value(Function f)
    : kind_(Kind::Function), function_(std::make_shared<Function>(std::move(f))) {}

bool Value::truthy() const {
  switch (kind_) {
    case Kind::Undefined:
    case Kind::None: return false;
    case Kind::Bool:
    case Kind::Int: return int_ != 0;
    case Kind::Float: return float_ != 0;
    case Kind::String: return !string_->empty();
    case Kind::List: return !list_->empty();
    case Kind::Dict: return !dict_->items.empty();
    case Kind::Function: return true;
  }
  return false;
}

const char* Value::type_name() const {
  switch (kind_) {
    case Kind::Undefined: return "undefined";
    case Kind::None: return "none";
    case Kind::Bool: return "bool";
    case Kind::Int: return "int";
    case Kind::Float: return "float";
    case Kind::String: return "string";
    case Kind::List: return "list";
    case Kind::Dict: return namespace_ ? "namespace" : "dict";
    case Kind::Function: return "function";
  }
  return "?";
}

std::string float_repr(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value < 0 ? "-inf" : "inf";
  char digits[64];
  auto [end, ec] = std::to_chars(digits, digits + sizeof digits, value, std::chars_format::scientific);
  std::string sci(digits, end);  // d[.ddd]e±XX, shortest round trip
  const size_t e = sci.find('e');
  const int exponent = std::stoi(sci.substr(e + 1));
  if (exponent < -4 || exponent >= 16) {  // Python's repr switches to exponent form here
    std::string mantissa = sci.substr(0, e);
    char exp[16];
    std::snprintf(exp, sizeof exp, "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
    return mantissa + exp;
  }
  auto [fend, fec] = std::to_chars(digits, digits + sizeof digits, value, std::chars_format::fixed);
  std::string fixed(digits, fend);
  if (fixed.find('.') == std::string::npos) fixed += ".0";
  return fixed;
}

namespace {

std::string string_repr(const std::string& s) {
  const bool has_single = s.find('\'') != std::string::npos;
  const bool has_double = s.find('"') != std::string::npos;
  const char quote = has_single && !has_double ? '"' : '\'';
  std::string out(1, quote);
  for (unsigned char c : s) {
    if (c == '\\') out += "\\\\";
    else if (c == quote) out += std::string("\\") + static_cast<char>(c);
    else if (c == '\n') out += "\\n";
    else if (c == '\r') out += "\\r";
    else if (c == '\t') out += "\\t";
    else if (c < 0x20 || c == 0x7f) {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02x", c);
      out += hex;
    } else out += static_cast<char>(c);
  }
  return out + quote;
}

}  // namespace

std::string Value::str() const {
  switch (kind_) {
    case Kind::Undefined: return "";
    case Kind::String: return *string_;
    default: return repr();
  }
}

std::string Value::repr() const {
  switch (kind_) {
    case Kind::Undefined: return "";
    case Kind::None: return "None";
    case Kind::Bool: return int_ ? "True" : "False";
    case Kind::Int: return std::to_string(int_);
    case Kind::Float: return float_repr(float_);
    case Kind::String: return string_repr(*string_);
    case Kind::List: {
      std::string out = "[";
      for (size_t i = 0; i < list_->size(); ++i) out += (i ? ", " : "") + (*list_)[i].repr();
      return out + "]";
    }
    case Kind::Dict: {
      std::string out = namespace_ ? "<Namespace {" : "{";
      for (size_t i = 0; i < dict_->items.size(); ++i) {
        out += (i ? ", " : "") + string_repr(dict_->items[i].first) + ": " +
               dict_->items[i].second.repr();
      }
      return out + (namespace_ ? "}>" : "}");
    }
    case Kind::Function: return "<function>";
  }
  return "";
}

bool equal(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.kind() == Value::Kind::Float || b.kind() == Value::Kind::Float)
      return a.as_float() == b.as_float();
    return a.as_int() == b.as_int();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Value::Kind::Undefined:
    case Value::Kind::None: return true;
    case Value::Kind::String: return a.as_string() == b.as_string();
    case Value::Kind::List: {
      const List &x = a.as_list(), &y = b.as_list();
      if (x.size() != y.size()) return false;
      for (size_t i = 0; i < x.size(); ++i)
        if (!equal(x[i], y[i])) return false;
      return true;
    }
    case Value::Kind::Dict: {
      const Dict &x = a.as_dict(), &y = b.as_dict();
      if (x.items.size() != y.items.size()) return false;
      for (const auto& [k, v] : x.items) {
        const Value* other = y.find(k);
        if (!other || !equal(v, *other)) return false;
      }
      return true;
    }
    case Value::Kind::Function: return &a.as_function() == &b.as_function();
    default: return false;
  }
}

bool less(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.kind() == Value::Kind::Float || b.kind() == Value::Kind::Float)
      return a.as_float() < b.as_float();
    return a.as_int() < b.as_int();
  }
  if (a.is_string() && b.is_string()) return a.as_string() < b.as_string();
  if (a.is_list() && b.is_list()) {
    const List &x = a.as_list(), &y = b.as_list();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (less(x[i], y[i])) return true;
      if (less(y[i], x[i])) return false;
    }
    return x.size() < y.size();
  }
  throw Error(ErrorKind::Format, std::string("cannot compare ") + a.type_name() + " with " +
                                     b.type_name());
}

}  // namespace dsx::jinja
