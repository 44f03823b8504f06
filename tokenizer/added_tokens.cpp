// The scan looks only at positions whose byte starts some pattern, and at those tries the
// patterns with that first byte longest first, so the first hit is the leftmost-longest match.
// After a refused match the search goes on from its end, as HF's non-overlapping iterator does.
#include "tokenizer/added_tokens.h"

#include <algorithm>
#include <cstring>

#include "tokenizer/unicode_class.h"
#include "tokenizer/utf8.h"

namespace dsx::tokenizer {

AddedTokenMatcher::AddedTokenMatcher(std::vector<AddedToken> tokens,
                                     std::vector<std::string> patterns)
    : tokens_(std::move(tokens)), patterns_(std::move(patterns)) {
  for (size_t i = 0; i < tokens_.size(); ++i) {
    if (patterns_[i].empty()) continue;
    by_first_byte_[static_cast<unsigned char>(patterns_[i][0])].push_back(i);
  }
  int distinct = 0;
  for (int b = 0; b < 256; ++b) {
    if (!by_first_byte_[b].empty()) ++distinct, only_first_byte_ = b;
  }
  if (distinct != 1) only_first_byte_ = -1;
  for (auto& bucket : by_first_byte_) {
    std::stable_sort(bucket.begin(), bucket.end(),
                     [&](size_t a, size_t b) { return patterns_[a].size() > patterns_[b].size(); });
  }
}

std::optional<AddedTokenMatcher::Found> AddedTokenMatcher::find_from(std::string_view text,
                                                                     size_t from) const {
  if (tokens_.empty()) return std::nullopt;
  for (size_t pos = from; pos < text.size(); ++pos) {
    if (only_first_byte_ >= 0) {
      // Every token starts with the same byte (Llama 3's "<|"): memchr skips to it.
      const void* hit = std::memchr(text.data() + pos, only_first_byte_, text.size() - pos);
      if (!hit) return std::nullopt;
      pos = size_t(static_cast<const char*>(hit) - text.data());
    }
    const auto& bucket = by_first_byte_[static_cast<unsigned char>(text[pos])];
    if (bucket.empty()) continue;
    for (size_t index : bucket) {
      const std::string& p = patterns_[index];
      if (text.compare(pos, p.size(), p) == 0) return Found{index, pos, pos + p.size()};
    }
  }
  return std::nullopt;
}

void AddedTokenMatcher::split(std::string_view text, bool split_special_tokens,
                              std::vector<TextPiece>& out) const {
  size_t taken = 0;  // end of what the pieces so far cover
  size_t search = 0;
  while (auto found = find_from(text, search)) {
    search = found->end;
    const AddedToken& token = tokens_[found->index];
    if (split_special_tokens && token.special) continue;
    if (token.single_word) {
      bool word_before =
          found->begin > 0 && is_word_char(utf8::decode_before(text, found->begin).value);
      bool word_after =
          found->end < text.size() && is_word_char(utf8::decode_at(text, found->end).value);
      if (word_before || word_after) continue;
    }
    if (found->begin < taken) continue;  // inside whitespace an rstrip token took
    size_t begin = found->begin;
    size_t end = found->end;
    if (token.lstrip) {
      while (begin > taken) {
        auto cp = utf8::decode_before(text, begin);
        if (!is_unicode_whitespace(cp.value)) break;
        begin -= cp.length;
      }
    }
    if (token.rstrip) {
      while (end < text.size()) {
        auto cp = utf8::decode_at(text, end);
        if (!is_unicode_whitespace(cp.value)) break;
        end += cp.length;
      }
    }
    if (begin > taken) out.push_back({taken, begin, std::nullopt});
    out.push_back({begin, end, token.id});
    taken = end;
  }
  if (taken < text.size()) out.push_back({taken, text.size(), std::nullopt});
}

}  // namespace dsx::tokenizer
