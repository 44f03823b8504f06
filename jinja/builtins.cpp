// Filters, tests, methods and globals (see builtins.h). Each follows the Jinja or Python function
// of its name for the argument kinds chat templates pass.
#include "jinja/builtins.h"

#include <algorithm>
#include <cmath>
#include <ctime>
#include <map>
#include <utility>

#include "dsx/error.h"
#include "jinja/python_string.h"
#include "jinja/to_json.h"

namespace dsx::jinja {
namespace {

[[noreturn]] void fail(const std::string& what) { throw Error(ErrorKind::Format, what); }

Value count(size_t n) { return Value(static_cast<int64_t>(n)); }

std::optional<std::string> optional_string(const Value& v, const char* what) {
  if (v.is_undefined() || v.is_none()) return std::nullopt;
  if (!v.is_string()) fail(std::string(what) + " takes a string, not " + v.type_name());
  return v.as_string();
}

int64_t integer_arg(const Value& v, int64_t fallback, const char* what) {
  if (v.is_undefined() || v.is_none()) return fallback;
  if (v.kind() != Value::Kind::Int && v.kind() != Value::Kind::Bool)
    fail(std::string(what) + " takes an integer, not " + v.type_name());
  return v.as_int();
}

const std::string& string_of(const Value& v, const std::string& what) {
  if (!v.is_string()) fail(what + " needs a string, not " + v.type_name());
  return v.as_string();
}

// Jinja's attribute paths ("a.b", "0") as filters' attribute= takes them.
Value get_path(const Value& v, const std::string& path) {
  Value at = v;
  for (const std::string& part : py_split(path, std::string("."), -1)) {
    if (at.is_dict()) {
      const Value* next = at.as_dict().find(part);
      at = next ? *next : Value();
    } else if (at.is_list() && !part.empty() && std::all_of(part.begin(), part.end(), ::isdigit)) {
      const size_t i = std::stoul(part);
      at = i < at.as_list().size() ? at.as_list()[i] : Value();
    } else {
      at = Value();
    }
  }
  return at;
}

std::string html_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    const char* entity = c == '&' ? "&amp;" : c == '<' ? "&lt;" : c == '>' ? "&gt;" : c == '"' ? "&#34;" : c == '\'' ? "&#39;" : nullptr;
    if (entity) out += entity;
    else out += c;
  }
  return out;
}

Value tojson(const Value& input, const CallArgs& args) {
  JsonStyle style;
  const Value& indent = args.get(1000, "indent");
  if (indent.kind() == Value::Kind::Int) style.indent = std::string(static_cast<size_t>(std::max<int64_t>(0, indent.as_int())), ' ');
  else if (indent.is_string()) style.indent = indent.as_string();
  if (style.indent) style.item_separator = ",";
  const Value& separators = args.get(1000, "separators");
  if (separators.is_list()) {
    if (separators.as_list().size() != 2) fail("tojson: separators takes (item_separator, key_separator)");
    style.item_separator = string_of(separators.as_list()[0], "tojson's separators");
    style.key_separator = string_of(separators.as_list()[1], "tojson's separators");
  }
  style.ensure_ascii = args.get(1000, "ensure_ascii").truthy();
  style.sort_keys = args.get(1000, "sort_keys").truthy();
  return to_json(input, style);
}

Value indent(const Value& input, const CallArgs& args) {
  const Value& width = args.get(0, "width");
  const std::string pad = width.is_string() ? width.as_string()
                                            : std::string(static_cast<size_t>(integer_arg(width, 4, "indent's width")), ' ');
  const bool first = args.get(1, "first").truthy(), blank = args.get(2, "blank").truthy();
  const auto lines = py_split(input.str(), std::string("\n"), -1);
  std::string out;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (i > 0) out += '\n';
    if ((i > 0 || first) && (blank || !lines[i].empty())) out += pad;
    out += lines[i];
  }
  return out;
}

// A string reversed stays a string; anything else becomes a list.
Value reverse_items(List items, const Value& input) {
  std::reverse(items.begin(), items.end());
  if (!input.is_string()) return items;
  std::string s;
  for (const auto& c : items) s += c.as_string();
  return s;
}

Value join_items(const List& items, const CallArgs& args) {
  const auto separator = optional_string(args.get(0, "d"), "join's separator").value_or("");
  const auto attribute = optional_string(args.get(1, "attribute"), "join's attribute");
  std::string out;
  for (size_t i = 0; i < items.size(); ++i)
    out += (i ? separator : "") + (attribute ? get_path(items[i], *attribute) : items[i]).str();
  return out;
}

Value unique_items(const List& items) {
  List out;
  for (const auto& v : items)
    if (std::none_of(out.begin(), out.end(), [&](const Value& o) { return equal(o, v); })) out.push_back(v);
  return out;
}

Value sort_items(List items, const CallArgs& args) {
  const auto attribute = optional_string(args.get(2, "attribute"), "sort's attribute");
  std::stable_sort(items.begin(), items.end(), [&](const Value& a, const Value& b) {
    return attribute ? less(get_path(a, *attribute), get_path(b, *attribute)) : less(a, b);
  });
  if (args.get(0, "reverse").truthy()) std::reverse(items.begin(), items.end());
  return items;
}

// map(attribute=...) or map(filter, args...).
Value map_items(const List& items, const CallArgs& args) {
  List out;
  const auto attribute = optional_string(args.get(1000, "attribute"), "map's attribute");
  CallArgs rest;
  if (!attribute) {
    if (args.positional.empty()) fail("map needs attribute= or a filter name");
    rest.positional.assign(args.positional.begin() + 1, args.positional.end());
    rest.named = args.named;
  }
  for (const auto& v : items) {
    if (attribute) {
      Value got = get_path(v, *attribute);
      out.push_back(got.is_undefined() ? args.get(1000, "default") : got);
    } else {
      out.push_back(apply_filter(string_of(args.positional[0], "map's filter"), v, rest));
    }
  }
  return out;
}

// select, reject, selectattr and rejectattr: the items (or their attribute) that pass a test, or
// that are truthy where no test is named.
Value select_items(const std::string& name, const List& items, const CallArgs& args) {
  const bool by_attribute = name.size() > 6;
  const bool keep = name[0] == 's';
  const size_t test_at = by_attribute ? 1 : 0;
  const std::string attribute = by_attribute ? string_of(args.get(0, ""), name + "'s attribute") : "";
  CallArgs test_args;
  if (args.positional.size() > test_at + 1)
    test_args.positional.assign(args.positional.begin() + static_cast<ptrdiff_t>(test_at) + 1, args.positional.end());
  List out;
  for (const auto& v : items) {
    const Value subject = by_attribute ? get_path(v, attribute) : v;
    bool passed;
    if (args.positional.size() <= test_at) passed = subject.truthy();
    else {
      const std::string& test = string_of(args.positional[test_at], name + "'s test");
      passed = test == "defined"     ? !subject.is_undefined()
               : test == "undefined" ? subject.is_undefined()
                                     : apply_test(test, subject, test_args);
    }
    if (passed == keep) out.push_back(v);
  }
  return out;
}

Value sum_items(const List& items, const CallArgs& args) {
  Value total = args.get(1, "start").is_undefined() ? Value(int64_t{0}) : args.get(1, "start");
  for (const auto& v : items) {
    if (!v.is_number() || !total.is_number()) fail("sum needs numbers");
    total = total.kind() == Value::Kind::Float || v.kind() == Value::Kind::Float
                ? Value(total.as_float() + v.as_float())
                : Value(total.as_int() + v.as_int());
  }
  return total;
}

// min or max: the first of the smallest (largest) items; none for no items.
Value extreme_item(bool smallest, const List& items) {
  if (items.empty()) return Value();
  auto best = items.front();
  for (const auto& v : items)
    if (smallest ? less(v, best) : less(best, v)) best = v;
  return best;
}

Value sequence_filter(const std::string& name, const Value& input, const CallArgs& args) {
  List items = iterate(input);
  if (name == "first") return items.empty() ? Value() : items.front();
  if (name == "last") return items.empty() ? Value() : items.back();
  if (name == "list") return items;
  if (name == "reverse") return reverse_items(std::move(items), input);
  if (name == "join") return join_items(items, args);
  if (name == "unique") return unique_items(items);
  if (name == "sort") return sort_items(std::move(items), args);
  if (name == "map") return map_items(items, args);
  if (name == "select" || name == "reject" || name == "selectattr" || name == "rejectattr")
    return select_items(name, items, args);
  if (name == "sum") return sum_items(items, args);
  if (name == "min" || name == "max") return extreme_item(name == "min", items);
  return Value();  // not a sequence filter
}

Value number_filter(const std::string& name, const Value& input, const CallArgs& args) {
  if (name == "int") {
    if (input.is_number()) return input.kind() == Value::Kind::Float ? Value(static_cast<int64_t>(input.as_float())) : Value(input.as_int());
    if (input.is_string()) {
      try {
        return static_cast<int64_t>(std::stoll(py_strip(input.as_string(), std::nullopt, true, true)));
      } catch (const std::exception&) {
      }
    }
    return args.get(0, "default").is_undefined() ? Value(int64_t{0}) : args.get(0, "default");
  }
  if (name == "float") {
    if (input.is_number()) return input.as_float();
    if (input.is_string()) {
      try {
        return std::stod(input.as_string());
      } catch (const std::exception&) {
      }
    }
    return args.get(0, "default").is_undefined() ? Value(0.0) : args.get(0, "default");
  }
  if (!input.is_number()) fail("filter '" + name + "' needs a number, not " + std::string(input.type_name()));
  if (name == "abs") return input.kind() == Value::Kind::Float ? Value(std::abs(input.as_float())) : Value(std::abs(input.as_int()));
  // round(precision=0, method='common'): Python's round (half to even), a float as in Jinja
  const double scale = std::pow(10.0, static_cast<double>(integer_arg(args.get(0, "precision"), 0, "round's precision")));
  const std::string method = optional_string(args.get(1, "method"), "round's method").value_or("common");
  const double x = input.as_float() * scale;
  const double r = method == "floor" ? std::floor(x) : method == "ceil" ? std::ceil(x) : std::nearbyint(x);
  return r / scale;
}

Value string_filter(const std::string& name, const Value& input, const CallArgs& args) {
  const std::string s = input.str();
  if (name == "trim") return py_strip(s, optional_string(args.get(0, "chars"), "trim's chars"), true, true);
  if (name == "upper") return py_upper(s);
  if (name == "lower") return py_lower(s);
  if (name == "title") return py_title(s);
  if (name == "capitalize") return py_capitalize(s);
  if (name == "string") return s;
  if (name == "safe") return input.is_string() ? input : Value(s);
  if (name == "escape" || name == "e" || name == "forceescape") return html_escape(s);
  if (name == "indent") return indent(input, args);
  if (name == "replace") {
    return py_replace(s, string_of(args.get(0, "old"), "replace's old"), string_of(args.get(1, "new"), "replace's new"),
                      integer_arg(args.get(2, "count"), -1, "replace's count"));
  }
  if (name == "wordcount") return count(py_split(s, std::nullopt, -1).size());
  return Value();
}

}  // namespace

List iterate(const Value& value) {
  switch (value.kind()) {
    case Value::Kind::Undefined: return {};
    case Value::Kind::List: return value.as_list();
    case Value::Kind::String: {
      List out;
      for (auto& c : code_points(value.as_string())) out.emplace_back(std::move(c));
      return out;
    }
    case Value::Kind::Dict: {
      List out;
      for (const auto& [k, v] : value.as_dict().items) out.emplace_back(k);
      return out;
    }
    default: fail(std::string("cannot loop over a ") + value.type_name());
  }
}

Value apply_filter(const std::string& name, const Value& input, const CallArgs& args) {
  if (name == "tojson") return tojson(input, args);
  if (name == "length" || name == "count") {
    return input.is_string() ? count(code_points(input.as_string()).size()) : count(iterate(input).size());
  }
  if (name == "default" || name == "d") {
    const bool boolean = args.get(1, "boolean").truthy();
    const bool use_default = input.is_undefined() || (boolean && !input.truthy());
    return use_default ? (args.get(0, "default_value").is_undefined() ? Value("") : args.get(0, "default_value")) : input;
  }
  if (name == "items") {
    if (input.is_undefined()) return List{};
    if (!input.is_dict()) fail(std::string("filter 'items' needs a dict, not ") + input.type_name());
    List out;
    for (const auto& [k, v] : input.as_dict().items) out.push_back(List{Value(k), v});
    return out;
  }
  for (const char* n : {"first", "last", "list", "reverse", "join", "unique", "sort", "map", "select", "reject",
                        "selectattr", "rejectattr", "sum", "min", "max"})
    if (name == n) return sequence_filter(name, input, args);
  for (const char* n : {"int", "float", "abs", "round"})
    if (name == n) return number_filter(name, input, args);
  for (const char* n : {"trim", "upper", "lower", "title", "capitalize", "string", "safe", "escape", "e",
                        "forceescape", "indent", "replace", "wordcount"})
    if (name == n) return string_filter(name, input, args);
  fail("unknown filter '" + name + "'");
}

bool apply_test(const std::string& name, const Value& input, const CallArgs& args) {
  const Value& other = args.get(0, "value");
  using K = Value::Kind;
  if (name == "defined") return !input.is_undefined();
  if (name == "undefined") return input.is_undefined();
  if (name == "none") return input.is_none();
  if (name == "boolean") return input.kind() == K::Bool;
  if (name == "true") return input.kind() == K::Bool && input.as_bool();
  if (name == "false") return input.kind() == K::Bool && !input.as_bool();
  if (name == "integer") return input.kind() == K::Int;
  if (name == "float") return input.kind() == K::Float;
  if (name == "number") return input.is_number();
  if (name == "string") return input.is_string();
  if (name == "mapping") return input.is_dict();
  if (name == "iterable" || name == "sequence") return input.is_list() || input.is_dict() || input.is_string();
  if (name == "callable") return input.is_callable();
  if (name == "equalto" || name == "eq" || name == "==" || name == "sameas") return equal(input, other);
  if (name == "ne" || name == "!=") return !equal(input, other);
  if (name == "lt" || name == "lessthan") return less(input, other);
  if (name == "gt" || name == "greaterthan") return less(other, input);
  if (name == "le") return !less(other, input);
  if (name == "ge") return !less(input, other);
  if (name == "in") {
    if (other.is_string()) return input.is_string() && other.as_string().find(input.as_string()) != std::string::npos;
    for (const auto& v : iterate(other))
      if (equal(v, input)) return true;
    return false;
  }
  if (name == "odd" || name == "even" || name == "divisibleby") {
    if (input.kind() != K::Int) fail("test '" + name + "' needs an integer, not " + std::string(input.type_name()));
    const int64_t by = name == "divisibleby" ? integer_arg(other, 1, "divisibleby") : 2;
    if (by == 0) fail("divisibleby 0");
    const bool divisible = input.as_int() % by == 0;
    return name == "odd" ? !divisible : divisible;
  }
  if (name == "lower") return input.is_string() && py_lower(input.as_string()) == input.as_string();
  if (name == "upper") return input.is_string() && py_upper(input.as_string()) == input.as_string();
  fail("unknown test '" + name + "'");
}

Value method_of(const Value& object, const std::string& name) {
  if (object.is_dict()) {
    const Value self = object;
    if (name == "items") return Function([self](const CallArgs&) { return apply_filter("items", self, {}); });
    if (name == "keys") return Function([self](const CallArgs&) { return Value(iterate(self)); });
    if (name == "values")
      return Function([self](const CallArgs&) {
        List out;
        for (const auto& [k, v] : self.as_dict().items) out.push_back(v);
        return Value(out);
      });
    if (name == "get")
      return Function([self](const CallArgs& args) {
        const Value& key = args.get(0, "key");
        const Value* v = key.is_string() ? self.as_dict().find(key.as_string()) : nullptr;
        return v ? *v : (args.get(1, "default").is_undefined() ? Value::none() : args.get(1, "default"));
      });
    return Value();
  }
  if (!object.is_string()) return Value();
  const std::string s = object.as_string();
  auto method = [](auto body) { return Value(Function(body)); };
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    const bool left = name != "rstrip", right = name != "lstrip";
    return method([s, left, right, name](const CallArgs& args) {
      return Value(py_strip(s, optional_string(args.get(0, "chars"), name.c_str()), left, right));
    });
  }
  if (name == "startswith" || name == "endswith") {
    const bool start = name == "startswith";
    return method([s, start](const CallArgs& args) {
      const Value& what = args.get(0, "prefix");
      List options = what.is_list() ? what.as_list() : List{what};
      for (const auto& o : options) {
        const std::string& p = string_of(o, start ? "startswith" : "endswith");
        if (s.size() >= p.size() && (start ? s.compare(0, p.size(), p) : s.compare(s.size() - p.size(), p.size(), p)) == 0)
          return Value(true);
      }
      return Value(false);
    });
  }
  if (name == "split" || name == "rsplit") {
    return method([s](const CallArgs& args) {
      List out;
      for (auto& part : py_split(s, optional_string(args.get(0, "sep"), "split"), integer_arg(args.get(1, "maxsplit"), -1, "split")))
        out.emplace_back(std::move(part));
      return Value(out);
    });
  }
  if (name == "upper" || name == "lower" || name == "title" || name == "capitalize") {
    return method([object, name](const CallArgs&) { return string_filter(name, object, {}); });
  }
  if (name == "replace") {
    return method([object](const CallArgs& args) { return string_filter("replace", object, args); });
  }
  if (name == "find" || name == "count") {
    const bool find = name == "find";
    return method([s, find](const CallArgs& args) {
      const std::string& sub = string_of(args.get(0, "sub"), find ? "find" : "count");
      if (find) {
        const size_t at = s.find(sub);
        return at == std::string::npos ? Value(int64_t{-1}) : count(code_points(s.substr(0, at)).size());
      }
      size_t n = 0;
      for (size_t at = s.find(sub); at != std::string::npos && !sub.empty(); at = s.find(sub, at + sub.size())) ++n;
      return count(n);
    });
  }
  if (name == "join") {
    return method([s](const CallArgs& args) {
      CallArgs join;
      join.positional.push_back(s);
      return sequence_filter("join", args.get(0, "iterable"), join);
    });
  }
  return Value();
}

Dict globals() {
  Dict g;
  g.set("raise_exception", Function([](const CallArgs& args) -> Value {
          throw Error(ErrorKind::Format, "raise_exception: " + args.get(0, "message").str());
        }));
  auto keyword_dict = [](const CallArgs& args) {
    Dict d;
    for (const auto& p : args.positional) {
      if (!p.is_dict()) fail("namespace() and dict() take a dict or keywords");
      for (const auto& [k, v] : p.as_dict().items) d.set(k, v);
    }
    for (const auto& [k, v] : args.named) d.set(k, v);
    return d;
  };
  g.set("namespace", Function([keyword_dict](const CallArgs& args) { return Value::namespace_of(keyword_dict(args)); }));
  g.set("dict", Function([keyword_dict](const CallArgs& args) { return Value(keyword_dict(args)); }));
  g.set("range", Function([](const CallArgs& args) {
          const auto& p = args.positional;
          if (p.empty() || p.size() > 3) fail("range takes 1 to 3 integers");
          const int64_t start = p.size() > 1 ? integer_arg(p[0], 0, "range") : 0;
          const int64_t stop = integer_arg(p.size() > 1 ? p[1] : p[0], 0, "range");
          const int64_t step = p.size() > 2 ? integer_arg(p[2], 1, "range") : 1;
          if (step == 0) fail("range's step cannot be zero");
          if ((stop - start) / step > 1'000'000) fail("range of more than a million numbers");
          List out;
          for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) out.emplace_back(i);
          return Value(out);
        }));
  g.set("strftime_now", Function([](const CallArgs& args) {
          const std::string format = string_of(args.get(0, "format"), "strftime_now");
          const std::time_t now = std::time(nullptr);
          std::tm local{};
          localtime_r(&now, &local);
          char buf[256];
          const size_t n = std::strftime(buf, sizeof buf, format.c_str(), &local);
          return Value(std::string(buf, n));
        }));
  return g;
}

}  // namespace dsx::jinja
