// The JSON document a config file becomes: every value knows its line and column, objects keep
// their keys in file order, and numbers keep the text they were written as (so 5e8 and
// 500000000 can be told apart, as pydantic does). Parsing accepts what DeepSpeed's Hjson reader
// accepts in practice: //, /* */ and # comments and trailing commas. It rejects duplicate keys
// (naming them all, as DeepSpeed does), invalid UTF-8, NUL bytes and nesting deeper than
// kMaxDepth. It does not interpret any key: that is the schema's job (ds_config.cpp).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "dsx/json_input.h"

namespace dsx::config::json {

struct Position {
  int line = 0;    // 1-based; 0 means "not from a file" (a default or a derived value)
  int column = 0;  // 1-based, counted in characters (UTF-8 code points)
};

enum class Type { Null, Bool, Number, String, Array, Object };

const char* type_name(Type type);  // "null", "a boolean", "a number", ...

struct Member;

struct Value {
  Type type = Type::Null;
  Position pos;
  bool boolean = false;
  double number = 0;          // Number: the value as a double (may be inf for 1e400)
  std::string text;           // String: the string; Number: the number exactly as written
  std::vector<Value> items;   // Array
  std::vector<Member> members;  // Object, in file order

  bool is_null() const { return type == Type::Null; }
  bool is_string(std::string_view s) const { return type == Type::String && text == s; }
  const Value* find(std::string_view key) const;  // nullptr when absent (Object only)
  const Member* find_member(std::string_view key) const;
};

struct Member {
  std::string key;
  Position key_pos;
  Value value;
};

// Deepest nesting a config may have: that of every JSON file dsx reads. DeepSpeed configs need
// about 5; the limit keeps hostile input (100000 '[') from exhausting the stack anywhere downstream.
inline constexpr int kMaxDepth = kMaxJsonDepth;
// Largest config file read: DeepSpeed configs are a few KB; /dev/zero is refused at this size.
inline constexpr size_t kMaxConfigBytes = size_t{16} << 20;

// Parses `text`. `source` names it in messages (a file path). Throws dsx::Error(Config) with
// "source:line:column: what is wrong. what to do".
Value parse(std::string_view text, const std::string& source);

// Serialises a value as compact JSON (numbers as written, strings escaped).
std::string to_string(const Value& value);

// Helpers to build values in code (defaults, resolved "auto" values).
Value make_null();
Value make_bool(bool b);
Value make_int(long long n);
Value make_double(double d);
Value make_string(std::string s);

}  // namespace dsx::config::json
