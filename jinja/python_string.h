// Python's str methods over UTF-8 strings, by code point where Python counts code points.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dsx::jinja {

// str.strip / lstrip / rstrip: `chars` nullopt strips white space.
std::string py_strip(std::string_view s, const std::optional<std::string>& chars, bool left, bool right);
// str.split(sep=None, maxsplit=-1): no separator splits on runs of white space.
std::vector<std::string> py_split(std::string_view s, const std::optional<std::string>& sep, int64_t maxsplit);
std::string py_upper(std::string_view s);
std::string py_lower(std::string_view s);
std::string py_title(std::string_view s);
std::string py_capitalize(std::string_view s);
std::string py_replace(std::string_view s, std::string_view old, std::string_view with, int64_t count);
// The code points of s as separate strings (for indexing, slicing, iteration and len).
std::vector<std::string> code_points(std::string_view s);

}  // namespace dsx::jinja
