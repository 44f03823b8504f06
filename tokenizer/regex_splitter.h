// A pre-tokenizer pattern compiled with PCRE2 in UTF mode with Unicode properties (\p{L}, \s
// over all of Unicode; categories brought to Unicode 16.0 by regex_unicode_classes.h) and JIT.
// It finds the matches of the pattern in a text, left to right, as Hugging Face's Split
// pre-tokenizer sees them (Oniguruma there, PCRE2 here).
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace dsx::tokenizer {

struct TextSpan {
  size_t begin;
  size_t end;
};

class RegexSplitter {
 public:
  // Throws dsx::Error (Format) with PCRE2's message and the offset when `pattern` does not
  // compile; `where` names the file and JSON path for that message. `literal` matches the
  // pattern string as it is (Split's {"String": ...} form).
  RegexSplitter(const std::string& pattern, bool literal, const std::string& where);
  ~RegexSplitter();
  RegexSplitter(const RegexSplitter&) = delete;
  RegexSplitter& operator=(const RegexSplitter&) = delete;

  // Appends the non-empty matches in `text` (valid UTF-8) to `out`. Thread-safe.
  void find_all(std::string_view text, std::vector<TextSpan>& out) const;

  const std::string& pattern() const { return pattern_; }

 private:
  struct Compiled;
  std::unique_ptr<Compiled> compiled_;
  std::string pattern_;
  std::string where_;
};

}  // namespace dsx::tokenizer
