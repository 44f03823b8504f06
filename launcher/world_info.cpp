// World info: JSON text in Python's json.dumps layout, inside URL-safe base64.
#include "launcher/world_info.h"

#include <cctype>
#include <cstdio>

#include "dsx/base64.h"
#include "dsx/error.h"

namespace dsx::launcher {
namespace {

// json.dumps with ensure_ascii: quotes, backslashes and control characters escaped.
std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20 || c >= 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

[[noreturn]] void bad(const std::string& json, size_t pos, const std::string& what) {
  throw Error(ErrorKind::Usage, "--world_info: " + what + " at offset " + std::to_string(pos) +
                                    " of '" + json + "'; expected {\"host\": [slot, ...], ...}");
}

// A small recursive-descent reader for exactly {"host": [int, ...], ...}.
class WorldJsonReader {
 public:
  explicit WorldJsonReader(const std::string& json) : json_(json) {}

  World read() {
    World world;
    expect('{');
    if (peek() == '}') {
      ++pos_;
    } else {
      for (;;) {
        HostSlots host{read_string(), {}};
        expect(':');
        host.slots = read_int_list();
        if (find_host(world, host.host) >= 0) bad(json_, pos_, "duplicate host '" + host.host + "'");
        world.push_back(std::move(host));
        char c = next();
        if (c == '}') break;
        if (c != ',') bad(json_, pos_, "expected ',' or '}'");
      }
    }
    skip_space();
    if (pos_ != json_.size()) bad(json_, pos_, "trailing text");
    return world;
  }

 private:
  void skip_space() {
    while (pos_ < json_.size() && std::isspace(static_cast<unsigned char>(json_[pos_]))) ++pos_;
  }
  char peek() {
    skip_space();
    return pos_ < json_.size() ? json_[pos_] : '\0';
  }
  char next() {
    char c = peek();
    if (c == '\0') bad(json_, pos_, "unexpected end");
    ++pos_;
    return c;
  }
  void expect(char c) {
    if (next() != c) bad(json_, pos_ - 1, std::string("expected '") + c + "'");
  }
  std::string read_string() {
    expect('"');
    std::string s;
    while (pos_ < json_.size() && json_[pos_] != '"') {
      char c = json_[pos_++];
      if (c == '\\') {
        if (pos_ >= json_.size()) break;
        char e = json_[pos_++];
        if (e == 'u' && pos_ + 4 <= json_.size()) {
          s += static_cast<char>(std::stoi(json_.substr(pos_, 4), nullptr, 16));
          pos_ += 4;
        } else {
          s += e;
        }
      } else {
        s += c;
      }
    }
    if (pos_ >= json_.size()) bad(json_, pos_, "unterminated string");
    ++pos_;
    return s;
  }
  std::vector<int> read_int_list() {
    std::vector<int> list;
    expect('[');
    if (peek() == ']') {
      ++pos_;
      return list;
    }
    for (;;) {
      skip_space();
      size_t start = pos_;
      while (pos_ < json_.size() && std::isdigit(static_cast<unsigned char>(json_[pos_])) && pos_ - start < 9) ++pos_;
      if (pos_ == start) bad(json_, pos_, "expected a slot number");
      list.push_back(std::stoi(json_.substr(start, pos_ - start)));
      char c = next();
      if (c == ']') return list;
      if (c != ',') bad(json_, pos_ - 1, "expected ',' or ']'");
    }
  }

  const std::string& json_;
  size_t pos_ = 0;
};

}  // namespace

std::string world_to_json(const World& world) {
  std::string out = "{";
  for (size_t i = 0; i < world.size(); ++i) {
    if (i) out += ", ";
    out += json_string(world[i].host) + ": [";
    for (size_t j = 0; j < world[i].slots.size(); ++j) {
      if (j) out += ", ";
      out += std::to_string(world[i].slots[j]);
    }
    out += "]";
  }
  return out + "}";
}

std::string encode_world_info(const World& world) { return base64_urlsafe_encode(world_to_json(world)); }

World decode_world_info(const std::string& encoded) {
  if (encoded.empty() || encoded == "None") {
    throw Error(ErrorKind::Usage, "--world_info is missing: the node agent needs the world from the runner");
  }
  return WorldJsonReader(base64_urlsafe_decode(encoded)).read();
}

std::string base64_urlsafe_encode(const std::string& bytes) { return base64::encode(bytes, base64::kUrlSafe); }

std::string base64_urlsafe_decode(const std::string& text) {
  std::string out;
  unsigned acc = 0;
  int bits = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c == '=' || std::isspace(static_cast<unsigned char>(c))) continue;
    int v = base64::digit_of(c);
    if (v < 0) {
      throw Error(ErrorKind::Usage, "--world_info: character '" + std::string(1, c) + "' at offset " +
                                        std::to_string(i) + " is not base64");
    }
    acc = (acc << 6) | static_cast<unsigned>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += static_cast<char>((acc >> bits) & 0xff);
    }
  }
  return out;
}

}  // namespace dsx::launcher
