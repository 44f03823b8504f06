// Base64 decoding of the standard alphabet, strict about padding and length.
#include "cloud/base64.h"

#include <cstdint>

#include "dsx/base64.h"
#include "dsx/error.h"

namespace dsx::cloud {

std::string base64_encode(std::string_view bytes) { return base64::encode(bytes, base64::kStandard); }

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
      int d = base64::digit_of(c);
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
