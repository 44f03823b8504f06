// "Did you mean ...": the known key closest to a misspelt one, by edit distance (insertions,
// deletions, substitutions and swaps of neighbours, case-insensitive), or nothing when no key is
// close enough to be a likely typo.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dsx::config {

// Optimal-string-alignment distance between a and b, ignoring ASCII case.
size_t edit_distance(std::string_view a, std::string_view b);

// The candidate nearest to `key`, if it is within max(2, key.size() / 3) edits, or if one of
// them contains the other (e.g. "prefetch_bucket" for "stage3_prefetch_bucket_size").
std::optional<std::string> closest_key(std::string_view key, const std::vector<std::string>& candidates);

}  // namespace dsx::config
