// Joins the items of a range with a separator: join(ranks, ",") gives "0,1,3". Numbers go
// through std::to_string, strings as they are; `to_text` formats other items.
#pragma once

#include <string>
#include <string_view>
#include <type_traits>

namespace dsx {

template <class Range, class ToText>
std::string join(const Range& items, std::string_view separator, const ToText& to_text) {
  std::string out;
  bool first = true;
  for (const auto& item : items) {
    if (!first) out += separator;
    out += to_text(item);
    first = false;
  }
  return out;
}

template <class Range>
std::string join(const Range& items, std::string_view separator) {
  return join(items, separator, [](const auto& item) {
    if constexpr (std::is_convertible_v<decltype(item), std::string_view>) {
      return std::string(item);
    } else {
      return std::to_string(item);
    }
  });
}

}  // namespace dsx
