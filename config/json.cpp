// JSON with positions: RapidJSON's SAX reader drives a small handler that builds json::Value
// trees and remembers where each value starts. RapidJSON does the syntax (comments, trailing
// commas, UTF-8 validation); this file adds # comments, duplicate keys and line:column positions,
// and takes the depth limit of every JSON dsx reads (dsx/json_input.h).
#include "config/json.h"

#include <rapidjson/error/en.h>
#include <rapidjson/reader.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <unordered_set>

#include "dsx/error.h"
#include "dsx/json_input.h"

namespace dsx::config::json {

const char* type_name(Type type) {
  switch (type) {
    case Type::Null: return "null";
    case Type::Bool: return "a boolean";
    case Type::Number: return "a number";
    case Type::String: return "a string";
    case Type::Array: return "a list";
    case Type::Object: return "an object";
  }
  return "a value";
}

const Member* Value::find_member(std::string_view key) const {
  for (const auto& m : members)
    if (m.key == key) return &m;
  return nullptr;
}

const Value* Value::find(std::string_view key) const {
  const Member* m = find_member(key);
  return m ? &m->value : nullptr;
}

namespace {

// Maps byte offsets to line:column (columns count UTF-8 code points, not bytes).
class LineMap {
 public:
  explicit LineMap(std::string_view text) : text_(text) {
    line_starts_.push_back(0);
    for (size_t i = 0; i < text.size(); ++i)
      if (text[i] == '\n') line_starts_.push_back(i + 1);
  }
  // Lookups come in file order, so counting continues from the previous one on the same line:
  // linear in the file, even for a megabyte-long minified line.
  Position at(size_t offset) const {
    offset = std::min(offset, text_.size());
    auto it = std::upper_bound(line_starts_.begin(), line_starts_.end(), offset) - 1;
    Position p;
    p.line = static_cast<int>(it - line_starts_.begin()) + 1;
    size_t from = *it;
    p.column = 1;
    if (last_.line == p.line && last_offset_ <= offset) {
      from = last_offset_;
      p.column = last_.column;
    }
    for (size_t i = from; i < offset; ++i)
      if ((static_cast<unsigned char>(text_[i]) & 0xC0) != 0x80) ++p.column;
    last_ = p;
    last_offset_ = offset;
    return p;
  }

 private:
  std::string_view text_;
  std::vector<size_t> line_starts_;
  mutable Position last_;
  mutable size_t last_offset_ = 0;
};

// Hjson allows '#' comments; RapidJSON knows only // and /* */. Blank out '#' comments (keeping
// every offset, so positions stay right) while skipping strings and the other comments.
std::string blank_hash_comments(std::string_view text) {
  std::string out(text);
  size_t i = 0;
  while (i < out.size()) {
    char c = out[i];
    if (c == '"') {
      for (++i; i < out.size() && out[i] != '"'; ++i)
        if (out[i] == '\\') ++i;
      ++i;
    } else if (c == '/' && i + 1 < out.size() && out[i + 1] == '/') {
      while (i < out.size() && out[i] != '\n') ++i;
    } else if (c == '/' && i + 1 < out.size() && out[i + 1] == '*') {
      size_t end = out.find("*/", i + 2);
      i = end == std::string::npos ? out.size() : end + 2;
    } else if (c == '#') {
      while (i < out.size() && out[i] != '\n') out[i++] = ' ';
    } else {
      ++i;
    }
  }
  return out;
}

// RapidJSON's own StringStream is "copy-optimised": the reader advances a private copy while it
// reads a string or a number, so a handler would see a stale position. This stream is not, so
// Tell() in a callback is just past the token that triggered it.
struct TrackedStream {
  using Ch = char;
  explicit TrackedStream(const char* text) : src_(text), head_(text) {}
  Ch Peek() const { return *src_; }
  Ch Take() { return *src_++; }
  size_t Tell() const { return static_cast<size_t>(src_ - head_); }
  Ch* PutBegin() { return nullptr; }
  void Put(Ch) {}
  void Flush() {}
  size_t PutEnd(Ch*) { return 0; }
  const Ch* src_;
  const Ch* head_;
};

// Builds the Value tree from SAX events. Containers are open on `stack_`; a value goes into the
// innermost one. A parent's vector never grows while a child is open, so the pointers stay valid.
class TreeBuilder {
 public:
  TreeBuilder(const TrackedStream& stream, const LineMap& lines)
      : stream_(stream), lines_(lines) {}

  bool Null() { place(Type::Null, token_start(4)); return true; }
  bool Bool(bool b) {
    Value& v = place(Type::Bool, token_start(b ? 4 : 5));
    v.boolean = b;
    return true;
  }
  bool Int(int) { return false; }  // unreachable: numbers arrive as RawNumber
  bool Uint(unsigned) { return false; }
  bool Int64(int64_t) { return false; }
  bool Uint64(uint64_t) { return false; }
  bool Double(double) { return false; }
  bool RawNumber(const char* str, rapidjson::SizeType length, bool) {
    Value& v = place(Type::Number, token_start(length));
    v.text.assign(str, length);
    v.number = std::strtod(v.text.c_str(), nullptr);  // inf for 1e400: ranges are checked later
    return true;
  }
  bool String(const char* str, rapidjson::SizeType length, bool) {
    Value& v = place(Type::String, string_start());
    v.text.assign(str, length);
    return true;
  }
  bool Key(const char* str, rapidjson::SizeType length, bool) {
    Value& object = *stack_.back();
    Member m;
    m.key.assign(str, length);
    m.key_pos = lines_.at(string_start());
    if (!seen_keys_.back().insert(m.key).second) {
      duplicates_.push_back(m.key);
      duplicate_positions_.push_back(m.key_pos);
    }
    object.members.push_back(std::move(m));
    return true;
  }
  bool StartObject() { return open(Type::Object, '{'); }
  bool StartArray() { return open(Type::Array, '['); }
  bool EndObject(rapidjson::SizeType) { return close(); }
  bool EndArray(rapidjson::SizeType) { return close(); }

  Value root;
  std::vector<std::string> duplicates_;
  std::vector<Position> duplicate_positions_;

 private:
  size_t here() const { return stream_.Tell(); }
  size_t token_start(size_t length) const { return here() >= length ? here() - length : 0; }

  // The stream is just past a string's closing quote; its opening quote is the nearest quote
  // before that which is not escaped (an odd run of backslashes escapes it).
  size_t string_start() const {
    const char* head = stream_.head_;
    size_t i = here() >= 2 ? here() - 2 : 0;
    while (i > 0) {
      if (head[i] == '"') {
        size_t slashes = 0;
        while (i > slashes && head[i - 1 - slashes] == '\\') ++slashes;
        if (slashes % 2 == 0) return i;
      }
      --i;
    }
    return 0;
  }

  Value& slot() {
    if (stack_.empty()) return root;
    Value& parent = *stack_.back();
    if (parent.type == Type::Array) return parent.items.emplace_back();
    return parent.members.back().value;
  }

  Value& place(Type type, size_t offset) {
    Value& v = slot();
    v.type = type;
    v.pos = lines_.at(offset);
    return v;
  }

  bool open(Type type, char bracket) {
    size_t offset = here();
    while (offset > 0 && stream_.head_[offset] != bracket) --offset;
    Value& v = place(type, offset);
    stack_.push_back(&v);
    seen_keys_.emplace_back();
    return true;
  }

  bool close() {
    stack_.pop_back();
    seen_keys_.pop_back();
    return true;
  }

  const TrackedStream& stream_;
  const LineMap& lines_;
  std::vector<Value*> stack_;
  std::vector<std::unordered_set<std::string>> seen_keys_;  // keys of each open object
};

std::string where(const std::string& source, Position p) {
  return source + ":" + std::to_string(p.line) + ":" + std::to_string(p.column);
}

}  // namespace

Value parse(std::string_view text, const std::string& source) {
  // A UTF-8 byte order mark, as some Windows editors write one, is not part of the JSON.
  if (text.starts_with("\xEF\xBB\xBF")) text.remove_prefix(3);
  LineMap lines(text);
  if (size_t nul = text.find('\0'); nul != std::string_view::npos) {
    throw Error(ErrorKind::Config, where(source, lines.at(nul)) +
                                       ": the file contains a NUL byte; a config file is UTF-8 "
                                       "text. Check that it is the right file and not truncated.");
  }
  std::string clean = blank_hash_comments(text);
  TrackedStream stream(clean.c_str());
  TreeBuilder builder(stream, lines);
  DepthLimit<TreeBuilder> limited(builder, kMaxDepth);  // the same limit as every JSON dsx reads
  constexpr unsigned kFlags = rapidjson::kParseCommentsFlag | rapidjson::kParseTrailingCommasFlag |
                              rapidjson::kParseNumbersAsStringsFlag |
                              rapidjson::kParseValidateEncodingFlag;
  rapidjson::Reader reader;
  rapidjson::ParseResult ok = reader.Parse<kFlags>(stream, limited);
  if (!ok) {
    Position p = lines.at(ok.Offset());
    if (limited.too_deep()) {
      throw Error(ErrorKind::Config,
                  where(source, p) + ": values nested more than " + std::to_string(kMaxDepth) +
                      " levels deep; a ds_config needs a handful. Check the brackets.");
    }
    std::string what = rapidjson::GetParseError_En(ok.Code());
    if (!what.empty() && what.back() == '.') what.pop_back();
    throw Error(ErrorKind::Config, where(source, p) + ": invalid JSON: " + what +
                                       ". Fix the file there (comments and trailing commas "
                                       "are allowed; keys and strings need double quotes).");
  }
  if (!builder.duplicates_.empty()) {
    std::string names, places;
    for (size_t i = 0; i < builder.duplicates_.size(); ++i) {
      names += (i ? ", '" : "'") + builder.duplicates_[i] + "'";
      places += (i ? ", " : "") + std::to_string(builder.duplicate_positions_[i].line) + ":" +
                std::to_string(builder.duplicate_positions_[i].column);
    }
    throw Error(ErrorKind::Config,
                where(source, builder.duplicate_positions_[0]) +
                    ": Duplicate keys in DeepSpeed config: [" + names + "] (repeated at " +
                    places + "). DeepSpeed rejects this too; keep one of each.");
  }
  if (builder.root.type != Type::Object) {
    throw Error(ErrorKind::Config, where(source, builder.root.pos) +
                                       ": a ds_config is a JSON object ({ ... }), found " +
                                       type_name(builder.root.type) + ".");
  }
  return std::move(builder.root);
}

namespace {

void write(rapidjson::Writer<rapidjson::StringBuffer>& w, const Value& v) {
  switch (v.type) {
    case Type::Null: w.Null(); break;
    case Type::Bool: w.Bool(v.boolean); break;
    case Type::Number: w.RawValue(v.text.c_str(), v.text.size(), rapidjson::kNumberType); break;
    case Type::String: w.String(v.text.c_str(), static_cast<rapidjson::SizeType>(v.text.size())); break;
    case Type::Array:
      w.StartArray();
      for (const auto& item : v.items) write(w, item);
      w.EndArray();
      break;
    case Type::Object:
      w.StartObject();
      for (const auto& m : v.members) {
        w.Key(m.key.c_str(), static_cast<rapidjson::SizeType>(m.key.size()));
        write(w, m.value);
      }
      w.EndObject();
      break;
  }
}

}  // namespace

std::string to_string(const Value& value) {
  rapidjson::StringBuffer buffer;
  rapidjson::Writer<rapidjson::StringBuffer> writer(buffer);
  write(writer, value);
  return buffer.GetString();
}

Value make_null() { return Value{}; }

Value make_bool(bool b) {
  Value v;
  v.type = Type::Bool;
  v.boolean = b;
  return v;
}

Value make_int(long long n) {
  Value v;
  v.type = Type::Number;
  v.number = static_cast<double>(n);
  v.text = std::to_string(n);
  return v;
}

Value make_double(double d) {
  Value v;
  v.type = Type::Number;
  v.number = d;
  if (!std::isfinite(d)) {  // JSON has no inf/nan; callers never build them, keep output valid
    v.type = Type::Null;
    return v;
  }
  char buf[32];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, d);  // shortest round-trip form
  v.text.assign(buf, end);
  if (v.text.find_first_of(".eE") == std::string::npos) v.text += ".0";
  return v;
}

Value make_string(std::string s) {
  Value v;
  v.type = Type::String;
  v.text = std::move(s);
  return v;
}

}  // namespace dsx::config::json
