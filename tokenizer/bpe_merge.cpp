// Both loops pick the same pair each time: the lowest rank, and among equal ranks the leftmost
// position. The heap orders entries by (rank, original position); since merging keeps the order
// of the surviving symbols, the smallest original position is the leftmost one. Heap entries
// that a neighbouring merge made stale are recognised by their ids and skipped.
#include "tokenizer/bpe_merge.h"

#include <cstdint>
#include <queue>

namespace dsx::tokenizer {

void merge_by_scan(const PairTable& merges, std::vector<TokenId>& symbols) {
  size_t n = symbols.size();
  if (n < 2) return;
  uint32_t ranks[kScanMergeLimit];
  for (size_t i = 0; i + 1 < n; ++i) ranks[i] = merges.rank_of(symbols[i], symbols[i + 1]);
  while (n > 1) {
    size_t best = 0;
    for (size_t i = 1; i + 1 < n; ++i) {
      if (ranks[i] < ranks[best]) best = i;
    }
    if (ranks[best] == PairTable::kNoRank) break;
    symbols[best] = merges.find(symbols[best], symbols[best + 1])->merged_id;
    for (size_t i = best + 1; i + 1 < n; ++i) symbols[i] = symbols[i + 1];
    for (size_t i = best + 1; i + 2 < n; ++i) ranks[i] = ranks[i + 1];
    --n;
    if (best > 0) ranks[best - 1] = merges.rank_of(symbols[best - 1], symbols[best]);
    if (best + 1 < n) ranks[best] = merges.rank_of(symbols[best], symbols[best + 1]);
  }
  symbols.resize(n);
}

namespace {

struct Candidate {
  uint32_t rank;
  uint32_t left;  // original positions of the two symbols
  uint32_t right;
  TokenId left_id;
  TokenId right_id;
  bool operator>(const Candidate& o) const {
    return rank != o.rank ? rank > o.rank : left > o.left;
  }
};

}  // namespace

void merge_by_heap(const PairTable& merges, std::vector<TokenId>& symbols) {
  const size_t n = symbols.size();
  if (n < 2) return;
  constexpr uint32_t kNone = UINT32_MAX;
  std::vector<uint32_t> prev(n), next(n);
  std::vector<bool> alive(n, true);
  for (size_t i = 0; i < n; ++i) {
    prev[i] = i == 0 ? kNone : uint32_t(i - 1);
    next[i] = i + 1 == n ? kNone : uint32_t(i + 1);
  }
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> queue;
  auto offer = [&](uint32_t left, uint32_t right) {
    if (const Merge* m = merges.find(symbols[left], symbols[right])) {
      queue.push({m->rank, left, right, symbols[left], symbols[right]});
    }
  };
  for (uint32_t i = 0; i + 1 < n; ++i) offer(i, i + 1);
  while (!queue.empty()) {
    Candidate c = queue.top();
    queue.pop();
    bool stale = !alive[c.left] || !alive[c.right] || next[c.left] != c.right ||
                 symbols[c.left] != c.left_id || symbols[c.right] != c.right_id;
    if (stale) continue;
    symbols[c.left] = merges.find(c.left_id, c.right_id)->merged_id;
    alive[c.right] = false;
    next[c.left] = next[c.right];
    if (next[c.left] != kNone) prev[next[c.left]] = c.left;
    if (prev[c.left] != kNone) offer(prev[c.left], c.left);
    if (next[c.left] != kNone) offer(c.left, next[c.left]);
  }
  size_t out = 0;
  for (size_t i = 0; i < n; ++i) {
    if (alive[i]) symbols[out++] = symbols[i];
  }
  symbols.resize(out);
}

}  // namespace dsx::tokenizer
