// A cache of pre-token -> ids for repeated words: natural text repeats most of its words, so
// most pre-tokens skip BPE altogether. One cache per thread and tokenizer (keyed by a number
// each tokenizer gets once, never by its address, which a later tokenizer could reuse), so
// threads never lock; a cache that grows past its limit starts again empty.
#pragma once

#include <concepts>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/bpe_model.h"

namespace dsx::tokenizer {

uint64_t new_word_cache_owner();

// `Value` is what a word encodes to: its ids (WordCache), or more where a model needs it.
template <class Value>
class WordCacheOf {
 public:
  static constexpr size_t kMaxEntries = 1 << 17;
  static constexpr size_t kMaxWordBytes = 256;  // longer pre-tokens are rare: not kept

  // This thread's cache for the tokenizer numbered `owner`.
  static WordCacheOf& for_thread(uint64_t owner) {
    thread_local std::unordered_map<uint64_t, WordCacheOf> caches;
    thread_local uint64_t last_owner = 0;
    thread_local WordCacheOf* last = nullptr;
    if (owner != last_owner || !last) {
      last = &caches[owner];
      last_owner = owner;
    }
    return *last;
  }
  // A number no other tokenizer of this process has.
  static uint64_t new_owner() { return new_word_cache_owner(); }

  const Value* find(std::string_view word) const {
    auto it = entries_.find(word);
    return it == entries_.end() ? nullptr : &it->second;
  }
  void insert(std::string_view word, Value value) {
    if (word.size() > kMaxWordBytes) return;
    if (entries_.size() >= kMaxEntries) entries_.clear();
    entries_.emplace(std::string(word), std::move(value));
  }
  void insert(std::string_view word, const TokenId* ids,
              size_t count) requires std::same_as<Value, std::vector<TokenId>> {
    insert(word, Value(ids, ids + count));
  }

 private:
  std::unordered_map<std::string, Value, StringHash, std::equal_to<>> entries_;
};

using WordCache = WordCacheOf<std::vector<TokenId>>;

}  // namespace dsx::tokenizer
