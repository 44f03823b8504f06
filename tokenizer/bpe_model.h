// A BPE model as tokenizer.json describes it: a vocabulary (token string -> id), merges ranked by
// their position in the list, and the rules for a word: ignore_merges (a word that is a token is
// that token, Llama 3), byte_fallback (a character outside the vocabulary as its UTF-8 bytes'
// tokens <0x00>..<0xFF>, SentencePiece-style BPE) and unk_token / fuse_unk for characters outside
// the vocabulary otherwise. The model sees words in its own alphabet (byte-level BPE: after
// byte_level::to_alphabet).
#pragma once

#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "tokenizer/pair_table.h"
#include "tokenizer/tokenizer.h"

namespace dsx::tokenizer {

// A hash for short strings (tokens, words), 8 bytes per multiply; std::hash's murmur showed in
// profiles of the word cache.
struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const {
    uint64_t h = 0x9E3779B97F4A7C15ull ^ s.size();
    size_t i = 0;
    for (; i + 8 <= s.size(); i += 8) {
      uint64_t w;
      std::memcpy(&w, s.data() + i, 8);
      h = (h ^ w) * 0xBF58476D1CE4E5B9ull;
      h ^= h >> 31;
    }
    uint64_t tail = 0;
    if (i < s.size()) std::memcpy(&tail, s.data() + i, s.size() - i);
    h = (h ^ tail) * 0x94D049BB133111EBull;
    return size_t(h ^ (h >> 29));
  }
};
using Vocabulary = std::unordered_map<std::string, TokenId, StringHash, std::equal_to<>>;

struct BpeOptions {
  bool ignore_merges = false;
  bool byte_fallback = false;
  std::optional<TokenId> unk_id;
  bool fuse_unk = false;
};

class BpeModel {
 public:
  // Throws dsx::Error (Format) naming `where` when a merge names a token the vocabulary lacks.
  BpeModel(Vocabulary vocab, const std::vector<std::pair<std::string, std::string>>& merges,
           BpeOptions options, const std::string& where);

  // Appends the ids of one word (a pre-token in the model's alphabet).
  void encode_word(std::string_view word, std::vector<TokenId>& out) const;

  std::optional<TokenId> token_to_id(std::string_view token) const;
  // The token string of an id, or nullptr when the vocabulary has no such id.
  const std::string* id_to_token(TokenId id) const;
  TokenId max_id() const { return static_cast<TokenId>(tokens_.size()) - 1; }
  size_t merge_count() const { return merge_count_; }
  const PairTable& merges() const { return merges_; }

 private:
  void initial_symbols(std::string_view word, std::vector<TokenId>& symbols) const;
  // byte_fallback: the tokens of `character`'s bytes, appended; false (nothing appended) when the
  // vocabulary lacks one of them.
  bool append_byte_tokens(std::string_view character, std::vector<TokenId>& symbols) const;

  Vocabulary vocab_;
  std::vector<std::string> tokens_;  // id -> token ("" for ids the vocabulary skips)
  std::vector<bool> has_token_;
  std::vector<TokenId> id_of_small_char_;  // code points below 0x200 (the byte-level alphabet)
  std::vector<TokenId> id_of_byte_;        // byte_fallback's <0xXX> tokens, -1 where missing
  PairTable merges_;
  size_t merge_count_ = 0;
  BpeOptions options_;
};

}  // namespace dsx::tokenizer
