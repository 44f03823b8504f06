// utf8proc_map with an explicit length (no NULLTERM), so a NUL inside the text is a character
// like any other. UTF8PROC_STABLE keeps the result stable under later Unicode versions, as the
// standard normal forms are.
#include "tokenizer/normalizer.h"

#include <utf8proc.h>

#include <cstdlib>
#include <cstring>

#include "dsx/error.h"
#include "dsx/replace_all.h"
#include "tokenizer/utf8.h"

namespace dsx::tokenizer {
namespace {

int options_of(UnicodeForm form) {
  switch (form) {
    case UnicodeForm::NFC:
      return UTF8PROC_STABLE | UTF8PROC_COMPOSE;
    case UnicodeForm::NFD:
      return UTF8PROC_STABLE | UTF8PROC_DECOMPOSE;
    case UnicodeForm::NFKC:
      return UTF8PROC_STABLE | UTF8PROC_COMPOSE | UTF8PROC_COMPAT;
    case UnicodeForm::NFKD:
      return UTF8PROC_STABLE | UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT;
  }
  return 0;
}

bool is_ascii(std::string_view text) {
  for (char c : text) {
    if (static_cast<unsigned char>(c) >= 0x80) return false;
  }
  return true;
}

// The code points below kInertLimit that NFC leaves alone wherever they stand: NFC maps the
// character to itself, it is a starter (combining class 0, not a mark) and it cannot be the
// second of a composition (marks, and the Hangul jamo V and T, are the only ones that can).
// A text of inert characters only is its own NFC (the quick check of UAX #15 with Maybe
// counted as No), so most text skips utf8proc_map. Built once, from utf8proc's own answers.
constexpr char32_t kInertLimit = 0x30000;

bool nfc_keeps(char32_t cp) {
  utf8proc_uint8_t in[4];
  utf8proc_ssize_t n = utf8proc_encode_char(static_cast<utf8proc_int32_t>(cp), in);
  utf8proc_uint8_t* out = nullptr;
  utf8proc_ssize_t m =
      utf8proc_map(in, n, &out, static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE));
  bool same = m == n && std::memcmp(in, out, size_t(n)) == 0;
  std::free(out);
  return same;
}

const std::vector<bool>& nfc_inert() {
  static const std::vector<bool> inert = [] {
    std::vector<bool> bits(kInertLimit, false);
    for (char32_t cp = 0; cp < kInertLimit; ++cp) {
      if (cp >= 0xD800 && cp <= 0xDFFF) continue;  // surrogates: not characters
      if ((cp >= 0x1100 && cp <= 0x11FF) || (cp >= 0xA960 && cp <= 0xA97F) ||
          (cp >= 0xD7B0 && cp <= 0xD7FF)) {
        continue;  // Hangul jamo: compose algorithmically
      }
      const utf8proc_property_t* p = utf8proc_get_property(static_cast<utf8proc_int32_t>(cp));
      bool mark = p->category == UTF8PROC_CATEGORY_MN || p->category == UTF8PROC_CATEGORY_MC ||
                  p->category == UTF8PROC_CATEGORY_ME;
      if (p->combining_class != 0 || mark) continue;
      bits[cp] = cp < 0x80 || nfc_keeps(cp);
    }
    return bits;
  }();
  return inert;
}

bool nfc_unchanged(std::string_view text) {
  const std::vector<bool>& inert = nfc_inert();
  for (size_t pos = 0; pos < text.size();) {
    auto c = static_cast<unsigned char>(text[pos]);
    if (c < 0x80) {
      ++pos;
      continue;
    }
    auto cp = utf8::decode_at(text, pos);
    if (cp.value >= kInertLimit || !inert[cp.value]) return false;
    pos += cp.length;
  }
  return true;
}

}  // namespace

void Normalizer::apply_form(UnicodeForm form, std::string& out) const {
  utf8proc_uint8_t* result = nullptr;
  utf8proc_ssize_t length = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(out.data()),
                                         static_cast<utf8proc_ssize_t>(out.size()), &result,
                                         static_cast<utf8proc_option_t>(options_of(form)));
  if (length < 0) {
    throw Error(ErrorKind::Format, std::string("normalizing a text failed: ") + utf8proc_errmsg(length));
  }
  out.assign(reinterpret_cast<const char*>(result), size_t(length));
  std::free(result);
}

std::string_view Normalizer::apply(std::string_view text, std::string& out) const {
  if (forms_only_) {
    if (steps_.empty() || is_ascii(text)) return text;
    if (steps_.size() == 1 && steps_[0].form == UnicodeForm::NFC && nfc_unchanged(text)) return text;
  }
  out.assign(text);
  for (const Step& step : steps_) {
    switch (step.kind) {
      case Step::Kind::Form:
        if (!is_ascii(out)) apply_form(step.form, out);
        break;
      case Step::Kind::Prepend:
        if (!out.empty()) out.insert(0, step.text);
        break;
      case Step::Kind::Replace:
        out = replace_all(out, step.text, step.to);
        break;
    }
  }
  return out;
}

}  // namespace dsx::tokenizer
