// A cache of pre-token -> ids for repeated words: natural text repeats most of its words, so
// most pre-tokens skip BPE altogether. One cache per thread and tokenizer (keyed by a number
// each tokenizer gets once, never by its address, which a later tokenizer could reuse), so
// threads never lock; a cache that grows past its limit starts again empty.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/bpe_model.h"

namespace dsx::tokenizer {

class WordCache {
 public:
  static constexpr size_t kMaxEntries = 1 << 17;
  static constexpr size_t kMaxWordBytes = 256;  // longer pre-tokens are rare: not kept

  // This thread's cache for the tokenizer numbered `owner`.
  static WordCache& for_thread(uint64_t owner);
  // A number no other tokenizer of this process has.
  static uint64_t new_owner();

  const std::vector<TokenId>* find(std::string_view word) const {
    auto it = entries_.find(word);
    return it == entries_.end() ? nullptr : &it->second;
  }
  void insert(std::string_view word, const TokenId* ids, size_t count) {
    if (word.size() > kMaxWordBytes) return;
    if (entries_.size() >= kMaxEntries) entries_.clear();
    entries_.emplace(std::string(word), std::vector<TokenId>(ids, ids + count));
  }

 private:
  std::unordered_map<std::string, std::vector<TokenId>, StringHash, std::equal_to<>> entries_;
};

}  // namespace dsx::tokenizer
