// The merge loop: lowest rank first, leftmost on ties, and the scan and heap versions agreeing
// on every word.
#include <gtest/gtest.h>

#include <random>

#include "tokenizer/bpe_merge.h"

namespace dsx::tokenizer {
namespace {

// Symbols a=0 b=1 c=2; ab=3 (rank 1), bc=4 (rank 0), abc=5 from ab+c (rank 2), aa=6 (rank 3).
PairTable toy_merges() {
  PairTable t(8);
  t.insert(1, 2, {0, 4});
  t.insert(0, 1, {1, 3});
  t.insert(3, 2, {2, 5});
  t.insert(0, 0, {3, 6});
  return t;
}

TEST(BpeMerge, LowestRankWinsOverPosition) {
  // "abc": bc (rank 0) merges before ab (rank 1), so ab+c never forms: a, bc.
  for (auto merge : {merge_by_scan, merge_by_heap}) {
    std::vector<TokenId> word{0, 1, 2};
    merge(toy_merges(), word);
    EXPECT_EQ(word, (std::vector<TokenId>{0, 4}));
  }
}

TEST(BpeMerge, EqualRanksMergeLeftmostFirst) {
  // "aaa": aa at 0 and at 1 tie; the leftmost merges, leaving aa, a.
  for (auto merge : {merge_by_scan, merge_by_heap}) {
    std::vector<TokenId> word{0, 0, 0};
    merge(toy_merges(), word);
    EXPECT_EQ(word, (std::vector<TokenId>{6, 0}));
  }
}

TEST(BpeMerge, NoMergeLeavesTheWord) {
  for (auto merge : {merge_by_scan, merge_by_heap}) {
    std::vector<TokenId> word{2, 0, 2};
    merge(toy_merges(), word);
    EXPECT_EQ(word, (std::vector<TokenId>{2, 0, 2}));
  }
}

// The slow reference: find the lowest-rank adjacent pair (leftmost on ties), merge it, repeat.
std::vector<TokenId> reference_merge(const PairTable& table, std::vector<TokenId> word) {
  while (word.size() > 1) {
    size_t best = 0;
    uint32_t best_rank = PairTable::kNoRank;
    for (size_t i = 0; i + 1 < word.size(); ++i) {
      uint32_t r = table.rank_of(word[i], word[i + 1]);
      if (r < best_rank) best_rank = r, best = i;
    }
    if (best_rank == PairTable::kNoRank) break;
    word[best] = table.find(word[best], word[best + 1])->merged_id;
    word.erase(word.begin() + long(best) + 1);
  }
  return word;
}

// A random table over 6 letters (merged ids from 100 up, merges of merges too) and random words
// of 1 to 200 symbols: both implementations give the reference's ids.
TEST(BpeMerge, ScanAndHeapGiveTheReferenceOnRandomWords) {
  std::mt19937 rng(7);
  PairTable table(4096);
  std::vector<TokenId> known{0, 1, 2, 3, 4, 5};
  TokenId next = 100;
  for (uint32_t rank = 0; rank < 300; ++rank) {
    TokenId left = known[rng() % known.size()];
    TokenId right = known[rng() % known.size()];
    if (table.find(left, right)) continue;
    table.insert(left, right, {rank, next});
    known.push_back(next++);
  }
  size_t merged_somewhere = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    std::vector<TokenId> word(1 + rng() % 200);
    for (auto& s : word) s = TokenId(rng() % 6);
    std::vector<TokenId> expected = reference_merge(table, word);
    merged_somewhere += expected.size() < word.size();
    std::vector<TokenId> by_heap = word;
    merge_by_heap(table, by_heap);
    ASSERT_EQ(by_heap, expected) << "trial " << trial;
    if (word.size() <= kScanMergeLimit) {
      std::vector<TokenId> by_scan = word;
      merge_by_scan(table, by_scan);
      ASSERT_EQ(by_scan, expected) << "trial " << trial;
    }
    std::vector<TokenId> dispatched = word;
    merge_word(table, dispatched);
    ASSERT_EQ(dispatched, expected);
  }
  EXPECT_GT(merged_somewhere, 2500u);  // the table does merge most words
}

}  // namespace
}  // namespace dsx::tokenizer
