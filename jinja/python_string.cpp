// Python's str methods (see python_string.h); case mapping through utf8proc.
#include "jinja/python_string.h"

#include <utf8proc.h>

namespace dsx::jinja {
namespace {

// The code point at s[i] and its length in bytes; an invalid byte stands for itself.
std::pair<int32_t, size_t> decode(std::string_view s, size_t i) {
  utf8proc_int32_t cp = 0;
  const auto n = utf8proc_iterate(reinterpret_cast<const utf8proc_uint8_t*>(s.data() + i),
                                  static_cast<utf8proc_ssize_t>(s.size() - i), &cp);
  if (n <= 0) return {static_cast<unsigned char>(s[i]), 1};
  return {cp, static_cast<size_t>(n)};
}

void encode(std::string& out, int32_t cp) {
  utf8proc_uint8_t buf[4];
  const auto n = utf8proc_encode_char(cp, buf);
  out.append(reinterpret_cast<const char*>(buf), static_cast<size_t>(n));
}

// str.isspace()
bool is_space(int32_t cp) {
  return (cp >= 0x09 && cp <= 0x0d) || (cp >= 0x1c && cp <= 0x20) || cp == 0x85 || cp == 0xa0 ||
         cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200a) || cp == 0x2028 || cp == 0x2029 ||
         cp == 0x202f || cp == 0x205f || cp == 0x3000;
}

template <typename Map>
std::string map_code_points(std::string_view s, Map map) {
  std::string out;
  out.reserve(s.size());
  bool previous_cased = false;
  for (size_t i = 0; i < s.size();) {
    auto [cp, n] = decode(s, i);
    encode(out, map(cp, previous_cased));
    const auto category = utf8proc_category(cp);
    previous_cased = category == UTF8PROC_CATEGORY_LU || category == UTF8PROC_CATEGORY_LL ||
                     category == UTF8PROC_CATEGORY_LT;
    i += n;
  }
  return out;
}

}  // namespace

std::vector<std::string> code_points(std::string_view s) {
  std::vector<std::string> out;
  for (size_t i = 0; i < s.size();) {
    const size_t n = decode(s, i).second;
    out.emplace_back(s.substr(i, n));
    i += n;
  }
  return out;
}

std::string py_strip(std::string_view s, const std::optional<std::string>& chars, bool left, bool right) {
  const auto points = code_points(s);
  const auto set = chars ? code_points(*chars) : std::vector<std::string>{};
  auto strippable = [&](const std::string& p) {
    if (!chars) return is_space(decode(p, 0).first);
    for (const auto& c : set)
      if (c == p) return true;
    return false;
  };
  size_t begin = 0, end = points.size();
  while (left && begin < end && strippable(points[begin])) ++begin;
  while (right && end > begin && strippable(points[end - 1])) --end;
  std::string out;
  for (size_t i = begin; i < end; ++i) out += points[i];
  return out;
}

std::vector<std::string> py_split(std::string_view s, const std::optional<std::string>& sep, int64_t maxsplit) {
  std::vector<std::string> out;
  if (sep) {
    size_t start = 0;
    for (size_t at = s.find(*sep); at != std::string_view::npos && !sep->empty() &&
                                   (maxsplit < 0 || static_cast<int64_t>(out.size()) < maxsplit);
         at = s.find(*sep, start)) {
      out.emplace_back(s.substr(start, at - start));
      start = at + sep->size();
    }
    out.emplace_back(s.substr(start));
    return out;
  }
  size_t i = 0;
  auto skip_space = [&] {
    while (i < s.size() && is_space(decode(s, i).first)) i += decode(s, i).second;
  };
  skip_space();
  while (i < s.size()) {
    if (maxsplit >= 0 && static_cast<int64_t>(out.size()) == maxsplit) {
      out.push_back(py_strip(s.substr(i), std::nullopt, false, true));
      return out;
    }
    const size_t start = i;
    while (i < s.size() && !is_space(decode(s, i).first)) i += decode(s, i).second;
    out.emplace_back(s.substr(start, i - start));
    skip_space();
  }
  return out;
}

std::string py_upper(std::string_view s) {
  return map_code_points(s, [](int32_t cp, bool) { return utf8proc_toupper(cp); });
}

std::string py_lower(std::string_view s) {
  return map_code_points(s, [](int32_t cp, bool) { return utf8proc_tolower(cp); });
}

std::string py_title(std::string_view s) {
  return map_code_points(s, [](int32_t cp, bool previous_cased) {
    return previous_cased ? utf8proc_tolower(cp) : utf8proc_totitle(cp);
  });
}

std::string py_capitalize(std::string_view s) {
  bool first = true;
  return map_code_points(s, [&](int32_t cp, bool) {
    const int32_t mapped = first ? utf8proc_totitle(cp) : utf8proc_tolower(cp);
    first = false;
    return mapped;
  });
}

std::string py_replace(std::string_view s, std::string_view old, std::string_view with, int64_t count) {
  std::string out;
  if (old.empty()) {  // Python inserts `with` between every code point and at both ends
    const auto points = code_points(s);
    int64_t done = 0;
    for (const auto& p : points) {
      if (count < 0 || done++ < count) out += with;
      out += p;
    }
    if (count < 0 || done < count) out += with;
    return out;
  }
  size_t start = 0;
  int64_t done = 0;
  for (size_t at = s.find(old); at != std::string_view::npos && (count < 0 || done < count);
       at = s.find(old, start), ++done) {
    out.append(s.substr(start, at - start)).append(with);
    start = at + old.size();
  }
  out.append(s.substr(start));
  return out;
}

}  // namespace dsx::jinja
