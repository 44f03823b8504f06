// UTF-8 decoding and encoding for the tokenizers: text is UTF-8 bytes end to end, and only the
// few places that need code points (byte-level map, added-token word boundaries) decode them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace dsx::tokenizer::utf8 {

// The offset of the first byte that does not start a well-formed UTF-8 sequence, or nullopt.
std::optional<size_t> first_invalid_byte(std::string_view text);

// The code point at text[pos] (well-formed UTF-8 assumed) and its length in bytes.
struct CodePoint {
  char32_t value;
  size_t length;
};
CodePoint decode_at(std::string_view text, size_t pos);
// The code point that ends just before text[end] (end > 0).
CodePoint decode_before(std::string_view text, size_t end);

void append(std::string& out, char32_t code_point);

// Throws dsx::Error (Format) naming `what` and the byte offset when `text` is not UTF-8.
void require_valid(std::string_view text, std::string_view what);

}  // namespace dsx::tokenizer::utf8
