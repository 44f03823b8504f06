// The keys of a precompiled charsmap (see sentencepiece_charsmap.h). Layout, from sentencepiece's
// normalizer: a little-endian uint32 with the trie's size in bytes, the trie (uint32 units), then
// the rewrites. Each darts-clone unit packs a label (low byte), a has-leaf bit (8) and the offset
// to its children (bits 10-31, scaled by bit 9); a child for byte c sits at (node ^ offset) ^ c
// and carries label c.
#include "tokenizer/sentencepiece_charsmap.h"

#include <cstdint>
#include <cstring>
#include <vector>

namespace dsx::tokenizer {
namespace {

uint32_t unit_label(uint32_t unit) { return unit & ((1u << 31) | 0xFF); }
uint32_t unit_offset(uint32_t unit) { return (unit >> 10) << ((unit & (1u << 9)) >> 6); }

}  // namespace

bool charsmap_rewrites_spaces(std::string_view precompiled) {
  if (precompiled.empty()) return false;
  if (precompiled.size() < 4) return true;
  uint32_t trie_bytes = 0;
  std::memcpy(&trie_bytes, precompiled.data(), 4);
  if (trie_bytes % 4 != 0 || trie_bytes == 0 || trie_bytes > precompiled.size() - 4) return true;
  std::vector<uint32_t> units(trie_bytes / 4);
  std::memcpy(units.data(), precompiled.data() + 4, trie_bytes);
  // Depth-first over the nodes, each once: darts-clone shares the subtrees of common suffixes,
  // so a node can have several parents (and malformed bytes could even loop).
  std::vector<bool> seen(units.size());
  std::vector<uint32_t> pending{0};
  while (!pending.empty()) {
    const uint32_t node = pending.back();
    pending.pop_back();
    if (seen[node]) continue;
    seen[node] = true;
    const uint32_t children = node ^ unit_offset(units[node]);
    for (uint32_t byte = 1; byte < 256; ++byte) {
      const uint32_t child = children ^ byte;
      if (child >= units.size() || child == 0 || unit_label(units[child]) != byte) continue;
      if (byte == ' ') return true;
      pending.push_back(child);
    }
  }
  return false;
}

}  // namespace dsx::tokenizer
