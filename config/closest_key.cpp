// Edit distance for "did you mean" suggestions on unknown config keys.
#include "config/closest_key.h"

#include <algorithm>
#include <cctype>

namespace dsx::config {

size_t edit_distance(std::string_view a, std::string_view b) {
  auto lower = [](char c) { return static_cast<char>(std::tolower(static_cast<unsigned char>(c))); };
  const size_t n = a.size(), m = b.size();
  // Three rows are enough for the optimal-string-alignment recurrence.
  std::vector<size_t> prev2(m + 1), prev(m + 1), cur(m + 1);
  for (size_t j = 0; j <= m; ++j) prev[j] = j;
  for (size_t i = 1; i <= n; ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= m; ++j) {
      size_t cost = lower(a[i - 1]) == lower(b[j - 1]) ? 0 : 1;
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + cost});
      if (i > 1 && j > 1 && lower(a[i - 1]) == lower(b[j - 2]) && lower(a[i - 2]) == lower(b[j - 1]))
        cur[j] = std::min(cur[j], prev2[j - 2] + 1);
    }
    std::swap(prev2, prev);
    std::swap(prev, cur);
  }
  return prev[m];
}

std::optional<std::string> closest_key(std::string_view key, const std::vector<std::string>& candidates) {
  if (key.size() > 100) return std::nullopt;  // not a typo of a real key; and keeps this O(small)
  const size_t limit = std::max<size_t>(2, key.size() / 3);
  std::optional<std::string> best;
  size_t best_distance = limit + 1;
  for (const auto& c : candidates) {
    size_t d = edit_distance(key, c);
    if (d < best_distance) {
      best_distance = d;
      best = c;
    }
  }
  if (best) return best;
  if (key.size() >= 4) {  // a fragment or an extended form of a real key
    for (const auto& c : candidates)
      if (c.find(key) != std::string::npos ||
          (c.size() >= 4 && key.find(c) != std::string_view::npos))
        return c;
  }
  return std::nullopt;
}

}  // namespace dsx::config
