// The keys of a precompiled charsmap (see sentencepiece_charsmap.h). Layout, from sentencepiece's
// normalizer: a little-endian uint32 with the trie's size in bytes, the trie (uint32 units), then
// the rewrites, each ended by a NUL. Each darts-clone unit packs a label (low byte), a has-leaf
// bit (8) and the offset to its children (bits 10-31, scaled by bit 9); a child for byte c sits
// at (node ^ offset) ^ c and carries label c; a node's leaf (the rewrite's offset) at
// node ^ offset. darts-clone shares the subtrees of common suffixes, so a node may have several
// parents: walks keep a visited set.
#include "tokenizer/sentencepiece_charsmap.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <optional>
#include <tuple>
#include <utility>

namespace dsx::tokenizer {
namespace {

uint32_t unit_label(uint32_t unit) { return unit & ((1u << 31) | 0xFF); }
uint32_t unit_offset(uint32_t unit) { return (unit >> 10) << ((unit & (1u << 9)) >> 6); }
bool unit_has_leaf(uint32_t unit) { return (unit >> 8) & 1; }

class CharsmapTrie {
 public:
  // Nothing (not a trie) when the bytes do not hold one.
  static std::optional<CharsmapTrie> read(std::string_view precompiled) {
    if (precompiled.size() < 4) return std::nullopt;
    uint32_t trie_bytes = 0;
    std::memcpy(&trie_bytes, precompiled.data(), 4);
    if (trie_bytes % 4 != 0 || trie_bytes == 0 || trie_bytes > precompiled.size() - 4) {
      return std::nullopt;
    }
    CharsmapTrie trie;
    trie.units_.resize(trie_bytes / 4);
    std::memcpy(trie.units_.data(), precompiled.data() + 4, trie_bytes);
    trie.rewrites_ = precompiled.substr(4 + trie_bytes);
    trie.link_children();
    return trie;
  }

  // The rewrite of the key `key`, if it is one.
  std::optional<std::string_view> rewrite_of(std::string_view key) const {
    uint32_t node = 0;
    for (unsigned char byte : key) {
      const uint32_t child = (node ^ unit_offset(units_[node])) ^ byte;
      if (child >= units_.size() || unit_label(units_[child]) != byte) return std::nullopt;
      node = child;
    }
    const uint32_t leaf = node ^ unit_offset(units_[node]);
    if (!unit_has_leaf(units_[node]) || leaf >= units_.size()) return std::nullopt;
    const size_t at = units_[leaf] & ((1u << 31) - 1);
    if (at >= rewrites_.size()) return std::nullopt;
    const size_t end = rewrites_.find('\0', at);
    return rewrites_.substr(at, end == std::string_view::npos ? end : end - at);
  }

  // Whether `seq` appears in a key other than as the whole key (after its first byte, or at its
  // start followed by more), or a key ends inside a copy of `seq` (a malformed key that would eat
  // its first bytes).
  bool inside_another_key(std::string_view seq) const;

 private:
  void link_children();

  std::vector<uint32_t> units_;
  std::string_view rewrites_;
  std::vector<std::vector<std::pair<unsigned char, uint32_t>>> children_;  // by node
};

void CharsmapTrie::link_children() {
  children_.assign(units_.size(), {});
  std::vector<bool> seen(units_.size());
  std::vector<uint32_t> pending{0};
  while (!pending.empty()) {
    const uint32_t node = pending.back();
    pending.pop_back();
    if (seen[node]) continue;
    seen[node] = true;
    const uint32_t base = node ^ unit_offset(units_[node]);
    for (uint32_t byte = 1; byte < 256; ++byte) {
      const uint32_t child = base ^ byte;
      if (child >= units_.size() || child == 0 || unit_label(units_[child]) != byte) continue;
      children_[node].emplace_back(static_cast<unsigned char>(byte), child);
      pending.push_back(child);
    }
  }
}

// After `matched` bytes of `seq`, then `byte`: the longest prefix of `seq` the path now ends with.
size_t next_match(std::string_view seq, size_t matched, unsigned char byte) {
  std::string tail(seq.substr(0, std::min(matched, seq.size() - 1)));
  if (matched == seq.size()) tail = std::string(seq.substr(1));
  tail.push_back(static_cast<char>(byte));
  for (size_t length = std::min(tail.size(), seq.size()); length > 0; --length) {
    if (seq.substr(0, length) == std::string_view(tail).substr(tail.size() - length)) return length;
  }
  return 0;
}

bool CharsmapTrie::inside_another_key(std::string_view seq) const {
  // States: (node, bytes of seq matched at the path's end, whether the path is longer than them).
  const size_t states = seq.size() + 1;
  std::vector<bool> seen(units_.size() * states * 2);
  std::vector<std::tuple<uint32_t, size_t, bool>> pending{{0, 0, false}};
  while (!pending.empty()) {
    const auto [node, matched, deep] = pending.back();
    pending.pop_back();
    const size_t index = (size_t(node) * states + matched) * 2 + deep;
    if (seen[index]) continue;
    seen[index] = true;
    if (matched > 0 && matched < seq.size() && unit_has_leaf(units_[node])) return true;
    if (matched == seq.size() && (deep || !children_[node].empty())) return true;
    for (const auto& [byte, child] : children_[node]) {
      const size_t next = next_match(seq, matched, byte);
      pending.emplace_back(child, next, deep || next <= matched);
    }
  }
  return false;
}

}  // namespace

std::vector<std::string> spaces_read_alone(std::string_view precompiled) {
  static const char* const kCandidates[] = {" ", "\t", "\n", "\r", "\xC2\xA0", "\xE3\x80\x80"};
  if (precompiled.empty()) return {" "};
  const auto trie = CharsmapTrie::read(precompiled);
  if (!trie) return {};
  std::vector<std::string> alone;
  for (std::string_view space : kCandidates) {
    const auto rewrite = trie->rewrite_of(space);
    const bool becomes_a_space = rewrite ? *rewrite == " " : space == " ";
    if (becomes_a_space && !trie->inside_another_key(space)) alone.emplace_back(space);
  }
  return alone;
}

bool charsmap_rewrites_spaces(std::string_view precompiled) {
  const auto alone = spaces_read_alone(precompiled);
  return alone.empty() || alone.front() != " ";
}

}  // namespace dsx::tokenizer
