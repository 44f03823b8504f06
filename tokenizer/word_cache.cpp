#include "tokenizer/word_cache.h"

#include <atomic>

namespace dsx::tokenizer {

uint64_t new_word_cache_owner() {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1);
}

}  // namespace dsx::tokenizer
