// utf8proc_map with an explicit length (no NULLTERM), so a NUL inside the text is a character
// like any other. UTF8PROC_STABLE keeps the result stable under later Unicode versions, as the
// standard normal forms are.
#include "tokenizer/normalizer.h"

#include <utf8proc.h>

#include <cstdlib>

#include "dsx/error.h"

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

}  // namespace

std::string_view Normalizer::apply(std::string_view text, std::string& out) const {
  if (forms_.empty() || is_ascii(text)) return text;
  out.assign(text);
  for (UnicodeForm form : forms_) {
    utf8proc_uint8_t* result = nullptr;
    utf8proc_ssize_t length = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(out.data()),
                                           static_cast<utf8proc_ssize_t>(out.size()), &result,
                                           static_cast<utf8proc_option_t>(options_of(form)));
    if (length < 0) {
      throw Error(ErrorKind::Format,
                  std::string("normalizing a text failed: ") + utf8proc_errmsg(length));
    }
    out.assign(reinterpret_cast<const char*>(result), size_t(length));
    std::free(result);
  }
  return out;
}

}  // namespace dsx::tokenizer
