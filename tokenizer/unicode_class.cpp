#include "tokenizer/unicode_class.h"

#include <utf8proc.h>

#include "tokenizer/unicode_additions.h"

namespace dsx::tokenizer {

bool is_unicode_whitespace(char32_t cp) {
  return (cp >= 0x09 && cp <= 0x0D) || cp == 0x20 || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
         (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F ||
         cp == 0x205F || cp == 0x3000;
}

namespace {

// A character utf8proc 2.8 (Unicode 15.0) leaves unassigned that Unicode 16.0 makes a word
// character (unicode_additions.h: letters, marks, Nd, Nl, Pc assigned since 14.0).
bool is_added_word_char(char32_t cp) {
  for (const CategoryAdditions& c : unicode_additions()) {
    const bool word = c.category[0] == 'L' || c.category[0] == 'M' || c.category == "Nd" ||
                      c.category == "Nl" || c.category == "Pc";
    if (!word) continue;
    for (CodePointRange r : c.ranges)
      if (cp >= r.first && cp <= r.last) return true;
  }
  return false;
}

}  // namespace

bool is_word_char(char32_t cp) {
  if (cp < 0x80) {
    return (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z') || (cp >= '0' && cp <= '9') ||
           cp == '_';
  }
  if (cp == 0x200C || cp == 0x200D) return true;
  switch (utf8proc_category(static_cast<utf8proc_int32_t>(cp))) {
    case UTF8PROC_CATEGORY_LU:
    case UTF8PROC_CATEGORY_LL:
    case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_LO:
    case UTF8PROC_CATEGORY_NL:
    case UTF8PROC_CATEGORY_MN:
    case UTF8PROC_CATEGORY_MC:
    case UTF8PROC_CATEGORY_ME:
    case UTF8PROC_CATEGORY_ND:
    case UTF8PROC_CATEGORY_PC:
      return true;
    case UTF8PROC_CATEGORY_CN:
      return is_added_word_char(cp);
    default:
      return false;
  }
}

}  // namespace dsx::tokenizer
