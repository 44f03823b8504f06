// The table is built once; both directions are lookups.
#include "tokenizer/byte_level.h"

#include "tokenizer/utf8.h"

namespace dsx::tokenizer::byte_level {
namespace {

struct Tables {
  std::array<char32_t, 256> char_of{};
  std::array<int, 0x200> byte_of{};  // every alphabet code point is below U+0144

  Tables() {
    byte_of.fill(-1);
    char32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
      char_of[b] = printable ? char32_t(b) : next++;
      byte_of[char_of[b]] = b;
    }
  }
};

const Tables& tables() {
  static const Tables t;
  return t;
}

}  // namespace

char32_t char_of_byte(unsigned char byte) { return tables().char_of[byte]; }

std::optional<unsigned char> byte_of_char(char32_t cp) {
  if (cp >= tables().byte_of.size() || tables().byte_of[cp] < 0) return std::nullopt;
  return static_cast<unsigned char>(tables().byte_of[cp]);
}

std::string to_alphabet(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) utf8::append(out, char_of_byte(static_cast<unsigned char>(c)));
  return out;
}

void append_bytes_of(std::string_view token, std::string& out) {
  const size_t start = out.size();
  for (size_t pos = 0; pos < token.size();) {
    auto cp = utf8::decode_at(token, pos);
    auto byte = byte_of_char(cp.value);
    if (!byte) {
      out.resize(start);
      out.append(token);
      return;
    }
    out += static_cast<char>(*byte);
    pos += cp.length;
  }
}

}  // namespace dsx::tokenizer::byte_level
