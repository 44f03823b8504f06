#include "tokenizer/word_cache.h"

#include <atomic>

namespace dsx::tokenizer {

WordCache& WordCache::for_thread(uint64_t owner) {
  thread_local std::unordered_map<uint64_t, WordCache> caches;
  thread_local uint64_t last_owner = 0;
  thread_local WordCache* last = nullptr;
  if (owner != last_owner || !last) {
    last = &caches[owner];
    last_owner = owner;
  }
  return *last;
}

uint64_t WordCache::new_owner() {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1);
}

}  // namespace dsx::tokenizer
