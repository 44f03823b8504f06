// The pattern is scanned once, tracking whether we are inside a character class ([...], where a
// ']' right after '[' or '[^' is literal and [:alpha:] is a POSIX class); escapes are copied
// whole, \Q...\E untouched. The ranges are written as \x{..}-\x{..}, which PCRE2 reads in both
// places.
#define PCRE2_CODE_UNIT_WIDTH 8
#include "tokenizer/regex_unicode_classes.h"

#include <pcre2.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <optional>
#include <vector>

#include "tokenizer/unicode_additions.h"

namespace dsx::tokenizer {
namespace {

std::vector<CodePointRange> merged(std::vector<CodePointRange> ranges) {
  std::sort(ranges.begin(), ranges.end(), [](auto a, auto b) { return a.first < b.first; });
  std::vector<CodePointRange> out;
  for (CodePointRange r : ranges) {
    if (!out.empty() && r.first <= out.back().last + 1)
      out.back().last = std::max(out.back().last, r.last);
    else
      out.push_back(r);
  }
  return out;
}

// "\x{1C89}-\x{1C8A}..." for each property name PCRE2 accepts that gains characters.
const std::map<std::string, std::string, std::less<>>& additions_by_name() {
  static const auto table = [] {
    std::map<std::string, std::vector<CodePointRange>> ranges;
    for (const CategoryAdditions& c : unicode_additions()) {
      auto& exact = ranges[c.category];
      exact.insert(exact.end(), c.ranges.begin(), c.ranges.end());
      if (c.category[0] == 'C') continue;  // \p{C} holds Cn: it would have to lose them
      auto& major = ranges[c.category.substr(0, 1)];
      major.insert(major.end(), c.ranges.begin(), c.ranges.end());
      if (c.category == "Lu" || c.category == "Ll" || c.category == "Lt") {
        auto& cased = ranges["L&"];
        cased.insert(cased.end(), c.ranges.begin(), c.ranges.end());
      }
    }
    ranges["LC"] = ranges["L&"];
    std::map<std::string, std::string, std::less<>> text;
    for (auto& [name, list] : ranges) {
      std::string& out = text[name];
      for (CodePointRange r : merged(list)) {
        char buffer[32];
        std::snprintf(buffer, sizeof(buffer), "\\x{%X}-\\x{%X}", unsigned(r.first),
                      unsigned(r.last));
        out += buffer;
      }
    }
    return text;
  }();
  return table;
}

bool pcre2_knows_unicode_16() {
  static const bool knows = [] {
    const std::string version = pcre2_unicode_version();
    return std::stoi(version.empty() ? "0" : version) >= 16;
  }();
  return knows;
}

struct Property {
  size_t length;     // of the whole escape: \p{..}, \pL
  std::string name;  // without a leading '^'
  bool negated;      // \P, or \p{^..}
};

// The property escape at `i` (pattern[i] == '\\' and pattern[i+1] is 'p' or 'P').
std::optional<Property> read_property(std::string_view pattern, size_t i) {
  Property p{0, {}, pattern[i + 1] == 'P'};
  if (i + 2 >= pattern.size()) return std::nullopt;
  if (pattern[i + 2] != '{') {
    p.length = 3;
    p.name = std::string(1, pattern[i + 2]);
    return p;
  }
  const size_t close = pattern.find('}', i + 3);
  if (close == std::string_view::npos) return std::nullopt;
  std::string_view name = pattern.substr(i + 3, close - i - 3);
  if (!name.empty() && name[0] == '^') {
    p.negated = !p.negated;
    name.remove_prefix(1);
  }
  p.length = close + 1 - i;
  p.name = std::string(name);
  return p;
}

}  // namespace

std::string pcre2_unicode_version() {
  char buffer[64] = {};
  if (pcre2_config(PCRE2_CONFIG_UNICODE_VERSION, buffer) < 0) return "";
  return buffer;
}

bool may_hold_added_characters(std::string_view text) {
  // One byte per block of 64 code points (cp >> 6, which needs no last continuation byte); the
  // first addition is U+0897, so characters of one and two bytes are skipped undecoded.
  static const std::vector<uint8_t> blocks = [] {
    std::vector<uint8_t> marks(0x110000 >> 6);
    for (const CategoryAdditions& c : unicode_additions())
      for (CodePointRange r : c.ranges)
        for (char32_t block = r.first >> 6; block <= r.last >> 6; ++block) marks[block] = 1;
    return marks;
  }();
  const auto* p = reinterpret_cast<const unsigned char*>(text.data());
  const auto* end = p + text.size();
  while (p < end) {
    // Eight bytes at a time while none starts a character of three or four bytes (top three
    // bits set); a step may end inside a character, whose continuation bytes are then skipped.
    uint64_t word;
    if (end - p >= 8) {
      std::memcpy(&word, p, 8);
      if ((word & (word << 1) & (word << 2) & 0x8080808080808080ull) == 0) {
        p += 8;
        continue;
      }
    }
    const unsigned char lead = *p;
    if (lead < 0xE0) {
      ++p;
    } else if (lead < 0xF0) {
      if (blocks[(char32_t(lead & 0x0F) << 6) | (p[1] & 0x3F)]) return true;
      p += 3;
    } else {
      if (blocks[(char32_t(lead & 0x07) << 12) | (char32_t(p[1] & 0x3F) << 6) | (p[2] & 0x3F)])
        return true;
      p += 4;
    }
  }
  return false;
}

std::string with_unicode_16_categories(std::string_view pattern) {
  if (pcre2_knows_unicode_16()) return std::string(pattern);
  const auto& additions = additions_by_name();
  std::string out;
  bool in_class = false;
  for (size_t i = 0; i < pattern.size();) {
    const char c = pattern[i];
    if (c == '\\' && i + 1 < pattern.size()) {
      const char next = pattern[i + 1];
      if (next == 'Q') {  // literal up to \E
        const size_t end = pattern.find("\\E", i + 2);
        const size_t stop = end == std::string_view::npos ? pattern.size() : end + 2;
        out.append(pattern.substr(i, stop - i));
        i = stop;
        continue;
      }
      std::optional<Property> p;
      if (next == 'p' || next == 'P') p = read_property(pattern, i);
      if (next == 'd' || next == 'D')
        p = Property{2, "Nd", next == 'D'};  // \d is \p{Nd} with PCRE2_UCP
      if (p) {
        const std::string_view escape = pattern.substr(i, p->length);
        auto added = additions.find(p->name);
        if (added == additions.end() || (in_class && p->negated)) {
          out.append(escape);
        } else if (in_class) {
          out.append(escape).append(added->second);
        } else {
          out.append(p->negated ? "[^\\p{" : "[\\p{")
              .append(p->name)
              .append("}")
              .append(added->second)
              .append("]");
        }
        i += p->length;
        continue;
      }
      out.append(pattern.substr(i, 2));
      i += 2;
      continue;
    }
    if (!in_class && c == '[') {
      in_class = true;
      size_t j = i + 1;
      if (j < pattern.size() && pattern[j] == '^') ++j;
      if (j < pattern.size() && pattern[j] == ']') ++j;  // a literal ']'
      out.append(pattern.substr(i, j - i));
      i = j;
      continue;
    }
    if (in_class && c == '[' && i + 1 < pattern.size() && pattern[i + 1] == ':') {
      const size_t end = pattern.find(":]", i + 2);
      if (end != std::string_view::npos) {
        out.append(pattern.substr(i, end + 2 - i));
        i = end + 2;
        continue;
      }
    }
    if (in_class && c == ']') in_class = false;
    out.push_back(c);
    ++i;
  }
  return out;
}

}  // namespace dsx::tokenizer
