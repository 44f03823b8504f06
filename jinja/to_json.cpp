// json.dumps (see to_json.h).
#include "jinja/to_json.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "dsx/error.h"
#include "jinja/python_string.h"

namespace dsx::jinja {
namespace {

void escape_code_unit(std::string& out, unsigned unit) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "\\u%04x", unit & 0xffffu);
  out += buf;
}

void write_string(std::string& out, const std::string& s, bool ensure_ascii) {
  out += '"';
  for (const std::string& point : code_points(s)) {
    const unsigned char c = static_cast<unsigned char>(point[0]);
    if (point.size() == 1) {
      switch (c) {
        case '"': out += "\\\""; continue;
        case '\\': out += "\\\\"; continue;
        case '\n': out += "\\n"; continue;
        case '\r': out += "\\r"; continue;
        case '\t': out += "\\t"; continue;
        case '\b': out += "\\b"; continue;
        case '\f': out += "\\f"; continue;
      }
      if (c < 0x20 || (ensure_ascii && c >= 0x7f)) escape_code_unit(out, c);
      else out += point;
      continue;
    }
    if (!ensure_ascii) {
      out += point;
      continue;
    }
    // Decode the UTF-8 sequence and write it as UTF-16 escapes.
    unsigned cp = c & (point.size() == 2 ? 0x1f : point.size() == 3 ? 0x0f : 0x07);
    for (size_t i = 1; i < point.size(); ++i) cp = (cp << 6) | (static_cast<unsigned char>(point[i]) & 0x3f);
    if (cp >= 0x10000) {
      cp -= 0x10000;
      escape_code_unit(out, 0xd800 + (cp >> 10));
      escape_code_unit(out, 0xdc00 + (cp & 0x3ff));
    } else {
      escape_code_unit(out, cp);
    }
  }
  out += '"';
}

class Writer {
 public:
  explicit Writer(const JsonStyle& style) : style_(style) {}

  void write(const Value& v, int depth) {
    switch (v.kind()) {
      case Value::Kind::None: out += "null"; return;
      case Value::Kind::Bool: out += v.as_bool() ? "true" : "false"; return;
      case Value::Kind::Int: out += std::to_string(v.as_int()); return;
      case Value::Kind::Float: {
        const double f = v.as_float();
        out += std::isnan(f) ? "NaN" : std::isinf(f) ? (f < 0 ? "-Infinity" : "Infinity") : float_repr(f);
        return;
      }
      case Value::Kind::String: write_string(out, v.as_string(), style_.ensure_ascii); return;
      case Value::Kind::List: {
        const List& list = v.as_list();
        if (list.empty()) {
          out += "[]";
          return;
        }
        out += '[';
        for (size_t i = 0; i < list.size(); ++i) {
          separate(i, depth + 1);
          write(list[i], depth + 1);
        }
        close(depth, ']');
        return;
      }
      case Value::Kind::Dict: {
        auto items = v.as_dict().items;
        if (items.empty()) {
          out += "{}";
          return;
        }
        if (style_.sort_keys)
          std::stable_sort(items.begin(), items.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
        out += '{';
        for (size_t i = 0; i < items.size(); ++i) {
          separate(i, depth + 1);
          write_string(out, items[i].first, style_.ensure_ascii);
          out += style_.key_separator;
          write(items[i].second, depth + 1);
        }
        close(depth, '}');
        return;
      }
      default:
        throw Error(ErrorKind::Format, std::string("tojson: a value of type ") + v.type_name() +
                                           " is not JSON serializable");
    }
  }

  std::string out;

 private:
  void newline(int depth) {
    out += '\n';
    for (int i = 0; i < depth; ++i) out += *style_.indent;
  }
  void separate(size_t index, int depth) {
    if (index > 0) out += style_.item_separator;
    if (style_.indent) newline(depth);
  }
  void close(int depth, char bracket) {
    if (style_.indent) newline(depth);
    out += bracket;
  }

  const JsonStyle& style_;
};

}  // namespace

std::string to_json(const Value& value, const JsonStyle& style) {
  Writer writer(style);
  writer.write(value, 0);
  return std::move(writer.out);
}

}  // namespace dsx::jinja
