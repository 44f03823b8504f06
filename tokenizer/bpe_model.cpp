// Set-up turns strings into ids once: the merge table holds id pairs, and the characters of the
// byte-level alphabet have a direct id table, so encoding a word does no string hashing except
// the ignore_merges lookup of the whole word.
#include "tokenizer/bpe_model.h"

#include <cstdio>

#include "dsx/error.h"
#include "tokenizer/bpe_merge.h"
#include "tokenizer/utf8.h"

namespace dsx::tokenizer {

BpeModel::BpeModel(Vocabulary vocab, const std::vector<std::pair<std::string, std::string>>& merges,
                   BpeOptions options, const std::string& where)
    : vocab_(std::move(vocab)), merges_(merges.size()), options_(options) {
  TokenId max_id = -1;
  for (const auto& [token, id] : vocab_) max_id = std::max(max_id, id);
  tokens_.resize(size_t(max_id + 1));
  has_token_.assign(size_t(max_id + 1), false);
  for (const auto& [token, id] : vocab_) {
    tokens_[size_t(id)] = token;
    has_token_[size_t(id)] = true;
  }
  id_of_small_char_.assign(0x200, -1);
  for (const auto& [token, id] : vocab_) {
    if (token.empty()) continue;
    auto cp = utf8::decode_at(token, 0);
    if (cp.length == token.size() && cp.value < 0x200) id_of_small_char_[cp.value] = id;
  }
  id_of_byte_.assign(256, -1);
  if (options_.byte_fallback) {
    for (int b = 0; b < 256; ++b) {
      char name[8];
      std::snprintf(name, sizeof name, "<0x%02X>", b);
      if (auto id = token_to_id(name)) id_of_byte_[size_t(b)] = *id;
    }
  }
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const auto& [left, right] = merges[rank];
    auto left_id = token_to_id(left);
    auto right_id = token_to_id(right);
    auto merged_id = token_to_id(left + right);
    if (!left_id || !right_id || !merged_id) {
      const std::string& missing = !left_id ? left : !right_id ? right : left + right;
      throw Error(ErrorKind::Format,
                  where + ": model.merges[" + std::to_string(rank) + "] (\"" + left + "\", \"" +
                      right + "\") uses the token \"" + missing +
                      "\" that model.vocab does not have; the file is inconsistent (re-save it "
                      "with the tokenizers library)");
    }
    merges_.insert(*left_id, *right_id, Merge{uint32_t(rank), *merged_id});
  }
  merge_count_ = merges.size();
}

std::optional<TokenId> BpeModel::token_to_id(std::string_view token) const {
  auto it = vocab_.find(token);
  if (it == vocab_.end()) return std::nullopt;
  return it->second;
}

const std::string* BpeModel::id_to_token(TokenId id) const {
  if (id < 0 || size_t(id) >= tokens_.size() || !has_token_[size_t(id)]) return nullptr;
  return &tokens_[size_t(id)];
}

// One symbol per character; a character outside the vocabulary becomes its bytes' tokens with
// byte_fallback (when the vocabulary has all of them), else unk_token (runs of them one unk with
// fuse_unk) or, without an unk_token, is left out, as HF's BPE does.
void BpeModel::initial_symbols(std::string_view word, std::vector<TokenId>& symbols) const {
  bool previous_unk = false;
  for (size_t pos = 0; pos < word.size();) {
    auto cp = utf8::decode_at(word, pos);
    std::optional<TokenId> id;
    if (cp.value < 0x200) {
      if (id_of_small_char_[cp.value] >= 0) id = id_of_small_char_[cp.value];
    } else {
      id = token_to_id(word.substr(pos, cp.length));
    }
    const std::string_view character = word.substr(pos, cp.length);
    pos += cp.length;
    if (id) {
      symbols.push_back(*id);
      previous_unk = false;
    } else if (options_.byte_fallback && append_byte_tokens(character, symbols)) {
      previous_unk = false;
    } else if (options_.unk_id) {
      if (!(options_.fuse_unk && previous_unk)) symbols.push_back(*options_.unk_id);
      previous_unk = true;
    }
  }
}

bool BpeModel::append_byte_tokens(std::string_view character, std::vector<TokenId>& symbols) const {
  for (unsigned char b : character)
    if (id_of_byte_[b] < 0) return false;
  for (unsigned char b : character) symbols.push_back(id_of_byte_[b]);
  return true;
}

void BpeModel::encode_word(std::string_view word, std::vector<TokenId>& out) const {
  if (options_.ignore_merges) {
    if (auto id = token_to_id(word)) {
      out.push_back(*id);
      return;
    }
  }
  thread_local std::vector<TokenId> symbols;
  symbols.clear();
  initial_symbols(word, symbols);
  merge_word(merges_, symbols);
  out.insert(out.end(), symbols.begin(), symbols.end());
}

}  // namespace dsx::tokenizer
