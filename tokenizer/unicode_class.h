// The two character classes added tokens need around a match (HF added_vocabulary.rs, with
// Rust regex's Unicode classes): whitespace for lstrip/rstrip, word characters for single_word.
#pragma once

namespace dsx::tokenizer {

// Unicode's White_Space property (PropList.txt; the list has not changed since Unicode 6.3).
bool is_unicode_whitespace(char32_t code_point);
// \w by general category (utf8proc, with the characters Unicode 16.0 assigned after its tables):
// letters, Nl, marks, Nd, Pc, and the two joiners. Rust's \w also has Other_Alphabetic symbols
// such as the circled letters U+24B6..U+24E9, which this does not.
bool is_word_char(char32_t code_point);

}  // namespace dsx::tokenizer
