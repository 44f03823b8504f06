// Quoting a word for a POSIX shell (`sh -c` on the far side of ssh and pdsh, the scripts dsx
// prints and renders): single quotes with '\'' for a quote inside, so no value or argument can
// inject a command.
#pragma once

#include <string>
#include <string_view>

namespace dsx {

// `word` unchanged when it only has [A-Za-z0-9_@%+=:,./-] (and is not empty), else single-quoted.
inline std::string shell_quote(std::string_view word) {
  auto safe_char = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           std::string_view("_@%+=:,./-").find(c) != std::string_view::npos;
  };
  bool safe = !word.empty();
  for (char c : word) safe = safe && safe_char(c);
  if (safe) return std::string(word);
  std::string out = "'";
  for (char c : word) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

}  // namespace dsx
