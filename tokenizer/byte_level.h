// GPT-2's byte-level alphabet: every byte 0-255 stands for one printable code point, so a BPE
// vocabulary of strings covers arbitrary bytes. Printable bytes ('!'..'~', 0xA1..0xAC,
// 0xAE..0xFF) map to themselves; the other 68, in increasing order, to U+0100, U+0101, ...
// (space -> 'Ġ' U+0120, '\n' -> 'Ċ' U+010A). Same table as HF tokenizers and tiktoken.
#pragma once

#include <array>
#include <optional>
#include <string>
#include <string_view>

namespace dsx::tokenizer::byte_level {

char32_t char_of_byte(unsigned char byte);
// The byte a code point of the alphabet stands for, or nullopt for one outside it.
std::optional<unsigned char> byte_of_char(char32_t code_point);

// Bytes -> their alphabet string (UTF-8), as the vocabulary spells them.
std::string to_alphabet(std::string_view bytes);
// An alphabet string back to bytes; a token with a character outside the alphabet (an added
// token such as " hello") is its own UTF-8 bytes, as HF's ByteLevel decoder does.
void append_bytes_of(std::string_view token, std::string& out);

}  // namespace dsx::tokenizer::byte_level
