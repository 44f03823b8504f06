// Added tokens (tokenizer.json's added_tokens): strings cut out of the text before the
// pre-tokenizer and emitted as their id, never run through BPE. Matching is leftmost-longest
// over all contents, as HF's Aho-Corasick; then each token's flags apply: single_word refuses a
// match glued to a word character, lstrip / rstrip take the whitespace on that side into the
// token, and with split_special_tokens the special ones are not matched at all.
#pragma once

#include <array>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace dsx::tokenizer {

struct AddedToken {
  TokenId id = 0;
  std::string content;
  bool special = false;
  bool lstrip = false;
  bool rstrip = false;
  bool single_word = false;
  bool normalized = false;
};

// A piece of the text: an added token (id set) or text for the normalizer and BPE.
struct TextPiece {
  size_t begin;
  size_t end;
  std::optional<TokenId> id;
};

class AddedTokenMatcher {
 public:
  // `patterns[i]` is what to look for for `tokens[i]` (its content, normalized for the
  // normalized ones).
  AddedTokenMatcher(std::vector<AddedToken> tokens, std::vector<std::string> patterns);

  bool empty() const { return tokens_.empty(); }
  // Cuts `text` into pieces, in order, covering all of it except whitespace a token stripped.
  void split(std::string_view text, bool split_special_tokens, std::vector<TextPiece>& out) const;

 private:
  struct Found {
    size_t index;
    size_t begin;
    size_t end;
  };
  std::optional<Found> find_from(std::string_view text, size_t from) const;

  std::vector<AddedToken> tokens_;
  std::vector<std::string> patterns_;
  std::array<std::vector<size_t>, 256> by_first_byte_;  // token indices, longest pattern first
  int only_first_byte_ = -1;  // the first byte of every pattern, when they all share one
};

}  // namespace dsx::tokenizer
