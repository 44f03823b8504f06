// PCRE2 matches \p{L}, \p{N}, ... with the tables of its own release (10.42, Debian 12's: Unicode
// 14.0); HF tokenizers 0.23 with Unicode 16.0's. This rewrites a pre-tokenizer pattern so that each
// general-category class also holds the characters assigned in between (unicode_additions.h), and
// PCRE2 splits text with Unicode 15.0, 15.1 and 16.0 characters as tokenizers does.
#pragma once

#include <string>
#include <string_view>

namespace dsx::tokenizer {

// `pattern` with \p{X} as [\p{X}<added ranges>] outside a character class, \P{X} as
// [^\p{X}<added ranges>], and inside a class [...\p{X}...] the ranges added after it. X is a
// category or major class (L, Lu, M, N, Nd, P, S, Z, ..., L&); \d and \D are \p{Nd} and \P{Nd}.
// Left as they are: C and its categories other than Cf (\p{Cn} would have to lose characters),
// \P{X} inside a class, \w, script properties, and everything when PCRE2's own tables are
// Unicode 16.0 or later.
std::string with_unicode_16_categories(std::string_view pattern);

// Whether `text` (valid UTF-8) may hold a character of unicode_additions(): false means the
// pattern as written and the rewritten one match it alike, and the faster one (PCRE2's own classes,
// no ranges to check) can run. A quick scan: true for any character in a block of 64 code points
// that holds one.
bool may_hold_added_characters(std::string_view text);

// The Unicode version of the linked PCRE2's tables ("14.0.0").
std::string pcre2_unicode_version();

}  // namespace dsx::tokenizer
