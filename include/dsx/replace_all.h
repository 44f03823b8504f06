// Every occurrence of `from` in `text` replaced by `to`, scanning left to right
// without overlaps (Rust's str::replace, which HF tokenizers' Replace steps use); an empty
// `from` leaves the text as it is.
#pragma once

#include <string>
#include <string_view>

namespace dsx {

inline std::string replace_all(std::string_view text, std::string_view from, std::string_view to) {
  if (from.empty()) return std::string(text);
  std::string out;
  out.reserve(text.size());
  size_t at = 0;
  for (size_t hit; (hit = text.find(from, at)) != std::string_view::npos; at = hit + from.size()) {
    out.append(text, at, hit - at);
    out.append(to);
  }
  out.append(text, at);
  return out;
}

}  // namespace dsx
