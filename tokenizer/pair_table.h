// The merge table of a BPE model: (left id, right id) -> (rank, merged id), open addressing
// with linear probing on one flat array. Looked up for every adjacent pair of every new word, so
// it avoids std::unordered_map's node per entry.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace dsx::tokenizer {

struct Merge {
  uint32_t rank;  // position in the merges list: lower merges first
  int32_t merged_id;
};

class PairTable {
 public:
  static constexpr uint32_t kNoRank = UINT32_MAX;

  explicit PairTable(size_t expected_pairs) {
    size_t capacity = 16;
    while (capacity < expected_pairs * 2) capacity *= 2;
    slots_.assign(capacity, Slot{kEmpty, {kNoRank, -1}});
    mask_ = capacity - 1;
  }

  // Keeps the first insertion of a pair (HF: a repeated merge keeps its first rank).
  void insert(int32_t left, int32_t right, Merge merge) {
    uint64_t key = key_of(left, right);
    for (size_t i = hash(key);; i = (i + 1) & mask_) {
      if (slots_[i].key == key) return;
      if (slots_[i].key == kEmpty) {
        slots_[i] = {key, merge};
        return;
      }
    }
  }

  const Merge* find(int32_t left, int32_t right) const {
    uint64_t key = key_of(left, right);
    for (size_t i = hash(key);; i = (i + 1) & mask_) {
      if (slots_[i].key == key) return &slots_[i].merge;
      if (slots_[i].key == kEmpty) return nullptr;
    }
  }

  uint32_t rank_of(int32_t left, int32_t right) const {
    const Merge* m = find(left, right);
    return m ? m->rank : kNoRank;
  }

 private:
  static constexpr uint64_t kEmpty = UINT64_MAX;  // ids are >= 0, so no real key is all ones
  struct Slot {
    uint64_t key;
    Merge merge;
  };
  static uint64_t key_of(int32_t left, int32_t right) {
    return (uint64_t(uint32_t(left)) << 32) | uint32_t(right);
  }
  size_t hash(uint64_t key) const { return size_t((key * 0x9E3779B97F4A7C15ull) >> 17) & mask_; }

  std::vector<Slot> slots_;
  size_t mask_ = 0;
};

}  // namespace dsx::tokenizer
