// The values a chat template computes with, as Jinja (that is, Python) sees them: undefined, none,
// bool, int, float, string, list, dict (in insertion order, as Python's) and functions (macros,
// raise_exception, bound methods). Lists and dicts are shared handles, so `set ns.x = ...` on a
// namespace is seen wherever the namespace is.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace dsx::jinja {

class Value;
using List = std::vector<Value>;

struct Dict {
  std::vector<std::pair<std::string, Value>> items;
  const Value* find(std::string_view key) const;
  void set(const std::string& key, Value value);
};

struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> named;
  // The argument at `index` or named `name`; undefined when neither was given.
  const Value& get(size_t index, std::string_view name) const;
};
using Function = std::function<Value(const CallArgs&)>;

class Value {
 public:
  enum class Kind { Undefined, None, Bool, Int, Float, String, List, Dict, Function };

  Value() = default;  // undefined
  static Value none();
  static Value namespace_of(Dict attributes);  // Jinja's namespace(): a dict `set` may change
  Value(bool b) : kind_(Kind::Bool), int_(b) {}
  Value(int i) : kind_(Kind::Int), int_(i) {}
  Value(int64_t i) : kind_(Kind::Int), int_(i) {}
  Value(double f) : kind_(Kind::Float), float_(f) {}
  Value(std::string s);
  Value(const char* s) : Value(std::string(s)) {}
  Value(List list);
  Value(Dict dict);
  Value(Function f);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::Undefined; }
  bool is_none() const { return kind_ == Kind::None; }
  bool is_number() const { return kind_ == Kind::Int || kind_ == Kind::Float || kind_ == Kind::Bool; }
  bool is_string() const { return kind_ == Kind::String; }
  bool is_list() const { return kind_ == Kind::List; }
  bool is_dict() const { return kind_ == Kind::Dict; }
  bool is_namespace() const { return kind_ == Kind::Dict && namespace_; }
  bool is_callable() const { return kind_ == Kind::Function; }

  bool as_bool() const { return int_ != 0; }
  int64_t as_int() const { return int_; }
  double as_float() const { return kind_ == Kind::Float ? float_ : static_cast<double>(int_); }
  const std::string& as_string() const { return *string_; }
  const List& as_list() const { return *list_; }
  const Dict& as_dict() const { return *dict_; }
  Dict& mutable_dict() const { return *dict_; }
  const Function& as_function() const { return *function_; }

  bool truthy() const;
  // Python's str(): what {{ value }} prints (undefined prints nothing).
  std::string str() const;
  // Python's repr(), used for the items of a printed list or dict.
  std::string repr() const;
  const char* type_name() const;

 private:
  Kind kind_ = Kind::Undefined;
  bool namespace_ = false;
  int64_t int_ = 0;
  double float_ = 0;
  std::shared_ptr<const std::string> string_;
  std::shared_ptr<List> list_;
  std::shared_ptr<Dict> dict_;
  std::shared_ptr<Function> function_;
};

// Python's ==, and < for numbers and strings (Error otherwise, as Python's TypeError).
bool equal(const Value& a, const Value& b);
bool less(const Value& a, const Value& b);

// Python's repr of a float: the shortest digits that read back, "1.0" not "1", 1e+16 and past in
// exponent form.
std::string float_repr(double value);

}  // namespace dsx::jinja
