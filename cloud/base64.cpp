// Base64 encoding and decoding, three bytes to four characters.
#include "cloud/base64.h"

#include <cstdint>

#include "dsx/error.h"

namespace dsx::cloud {

namespace {
constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

int value_of(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}
}  // namespace

std::string base64_encode(std::string_view bytes) {
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 3 <= bytes.size(); i += 3) {
    uint32_t v = uint32_t(uint8_t(bytes[i])) << 16 | uint32_t(uint8_t(bytes[i + 1])) << 8 |
                 uint8_t(bytes[i + 2]);
    for (int shift = 18; shift >= 0; shift -= 6) out += kAlphabet[(v >> shift) & 63];
  }
  size_t rest = bytes.size() - i;
  if (rest > 0) {
    uint32_t v = uint32_t(uint8_t(bytes[i])) << 16;
    if (rest == 2) v |= uint32_t(uint8_t(bytes[i + 1])) << 8;
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += rest == 2 ? kAlphabet[(v >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

std::string base64_decode(std::string_view text) {
  if (text.size() % 4 != 0) {
    throw Error(ErrorKind::Format, "base64 text of " + std::to_string(text.size()) +
                                       " characters is not a multiple of 4");
  }
  std::string out;
  out.reserve(text.size() / 4 * 3);
  for (size_t i = 0; i < text.size(); i += 4) {
    uint32_t v = 0;
    int padding = 0;
    for (size_t k = 0; k < 4; ++k) {
      char c = text[i + k];
      bool last_group = i + 4 == text.size();
      if (c == '=' && last_group && k >= 2 && (k == 3 || text[i + 3] == '=')) {
        ++padding;
        v <<= 6;
        continue;
      }
      int d = value_of(c);
      if (d < 0 || padding > 0) {
        throw Error(ErrorKind::Format,
                    "invalid base64 character at offset " + std::to_string(i + k));
      }
      v = v << 6 | uint32_t(d);
    }
    out += char((v >> 16) & 0xff);
    if (padding < 2) out += char((v >> 8) & 0xff);
    if (padding < 1) out += char(v & 0xff);
  }
  return out;
}

}  // namespace dsx::cloud
