// Single-quote shell words; a quote inside becomes '\''.
#include "cloud/shell_quote.h"

namespace dsx::cloud {

std::string shell_quote(std::string_view word) {
  bool safe = !word.empty();
  for (char c : word) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              std::string_view("@%+=:,./_-").find(c) != std::string_view::npos;
    if (!ok) safe = false;
  }
  if (safe) return std::string(word);
  std::string out = "'";
  for (char c : word) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  return out + "'";
}

}  // namespace dsx::cloud
