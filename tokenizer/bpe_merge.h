// The BPE merge loop: given a word as symbol ids, repeatedly merge the adjacent pair of lowest
// rank, the leftmost one on ties, until no pair has a merge (HF tokenizers' Word::merge_all).
// Two implementations with one result: a scan over a rank array for short words (the usual case,
// no allocation beyond the word) and a heap over a linked list for long ones, O(n log n).
#pragma once

#include <vector>

#include "tokenizer/pair_table.h"
#include "tokenizer/tokenizer.h"

namespace dsx::tokenizer {

// Words up to this many symbols use the scan; longer ones the heap.
inline constexpr size_t kScanMergeLimit = 48;

void merge_by_scan(const PairTable& merges, std::vector<TokenId>& symbols);
void merge_by_heap(const PairTable& merges, std::vector<TokenId>& symbols);

inline void merge_word(const PairTable& merges, std::vector<TokenId>& symbols) {
  if (symbols.size() <= kScanMergeLimit) {
    merge_by_scan(merges, symbols);
  } else {
    merge_by_heap(merges, symbols);
  }
}

}  // namespace dsx::tokenizer
