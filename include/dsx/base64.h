// Base64 (RFC 4648) in its two alphabets: standard ("+/": EC2 user data) and URL-safe ("-_":
// DeepSpeed's --world_info). Encoding pads with '='; digit_of reads either alphabet, so each
// decoder (strict for cloud files, lenient for the launcher's argument) decides only its rules.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "dsx/error.h"

namespace dsx::base64 {

inline constexpr char kStandard[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
inline constexpr char kUrlSafe[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

inline std::string encode(std::string_view bytes, const char* alphabet) {
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 3 <= bytes.size(); i += 3) {
    const uint32_t v = uint32_t(uint8_t(bytes[i])) << 16 | uint32_t(uint8_t(bytes[i + 1])) << 8 |
                       uint8_t(bytes[i + 2]);
    for (int shift = 18; shift >= 0; shift -= 6) out += alphabet[(v >> shift) & 63];
  }
  const size_t rest = bytes.size() - i;
  if (rest > 0) {
    uint32_t v = uint32_t(uint8_t(bytes[i])) << 16;
    if (rest == 2) v |= uint32_t(uint8_t(bytes[i + 1])) << 8;
    out += alphabet[(v >> 18) & 63];
    out += alphabet[(v >> 12) & 63];
    out += rest == 2 ? alphabet[(v >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

// The value of one base64 digit of either alphabet, or -1.
inline int digit_of(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+' || c == '-') return 62;
  if (c == '/' || c == '_') return 63;
  return -1;
}

// The standard alphabet decoded strictly (what the cloud files need: padding only at the end,
// a multiple of 4 characters). Throws dsx::Error(Format) on characters outside the alphabet or a
// bad length.
inline std::string decode_strict(std::string_view text) {
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
      int d = digit_of(c);
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

}  // namespace dsx::base64
