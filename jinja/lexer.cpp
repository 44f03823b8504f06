// Jinja's lexer for the subset chat templates use (see lexer.h).
#include "jinja/lexer.h"

#include <algorithm>
#include <cctype>

#include <utf8proc.h>

#include "dsx/error.h"

namespace dsx::jinja {
namespace {

[[noreturn]] void fail(int line, const std::string& what) {
  throw Error(ErrorKind::Format, "line " + std::to_string(line) + ": " + what);
}

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }
bool is_name_start(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool is_name_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

void append_utf8(std::string& out, uint32_t cp) {
  utf8proc_uint8_t buf[4];
  const auto n = utf8proc_encode_char(static_cast<utf8proc_int32_t>(cp), buf);
  out.append(reinterpret_cast<const char*>(buf), static_cast<size_t>(n));
}

class Lexer {
 public:
  Lexer(std::string_view src, const LexOptions& options) : src_(src), options_(options) {
    for (size_t i = src_.find('\n'); i != std::string_view::npos; i = src_.find('\n', i + 1))
      newlines_.push_back(i);
  }

  std::vector<Token> run() {
    size_t pos = 0;
    while (pos < src_.size()) {
      const size_t tag = next_tag(pos);
      std::string text(src_.substr(pos, tag - pos));
      if (tag == src_.size()) {
        emit_text(pos, std::move(text), '\0', false);
        break;
      }
      const char kind = src_[tag + 1];
      const char marker = tag + 2 < src_.size() ? src_[tag + 2] : '\0';
      emit_text(pos, std::move(text), kind, marker == '-', marker == '+');
      size_t body = tag + 2 + (marker == '-' || marker == '+' ? 1 : 0);
      pos = kind == '#' ? comment(body) : tag_body(kind, body);
    }
    out_.push_back({TokenKind::End, "", line_at(src_.size())});
    return std::move(out_);
  }

 private:
  size_t next_tag(size_t from) const {
    for (size_t i = src_.find('{', from); i != std::string_view::npos; i = src_.find('{', i + 1)) {
      if (i + 1 < src_.size() && (src_[i + 1] == '{' || src_[i + 1] == '%' || src_[i + 1] == '#'))
        return i;
    }
    return src_.size();
  }

  // Text before a tag of `kind` ('{', '%', '#', or '\0' at the end), with the pending strip of
  // the tag before it and this tag's own.
  void emit_text(size_t at, std::string text, char kind, bool strip_right, bool keep_indent = false) {
    // What the tag before consumed after itself; a line starts here when that ended with '\n'.
    size_t consumed = 0;
    if (strip_left_) {
      while (consumed < text.size() && is_space(text[consumed])) ++consumed;
    } else if (trim_newline_) {
      consumed = text.rfind("\r\n", 0) == 0 ? 2 : (!text.empty() && text[0] == '\n' ? 1 : 0);
    }
    if (consumed > 0) at_line_start_ = text[consumed - 1] == '\n';
    text.erase(0, consumed);
    strip_left_ = trim_newline_ = false;
    if (strip_right) {
      size_t n = text.size();
      while (n > 0 && is_space(text[n - 1])) --n;
      text.resize(n);
    } else if (options_.lstrip_blocks && !keep_indent && (kind == '%' || kind == '#')) {
      const size_t line_start = text.rfind('\n') + 1;  // 0 when there is none
      if ((line_start > 0 || at_line_start_) &&
          text.find_first_not_of(" \t\r\f\v", line_start) == std::string::npos)
        text.resize(line_start);
    }
    if (!text.empty()) out_.push_back({TokenKind::Text, text, line_at(at + consumed)});
    at_line_start_ = false;
  }

  int line_at(size_t pos) const {  // 1 + the newlines before pos
    return 1 + static_cast<int>(std::lower_bound(newlines_.begin(), newlines_.end(), pos) - newlines_.begin());
  }

  // After a tag's closing delimiter at `end` (its '-' or '+' marker, if any, at end - 1).
  size_t close_tag(size_t after, char marker, bool block) {
    strip_left_ = marker == '-';
    trim_newline_ = block && marker != '+' && options_.trim_blocks;
    return after;
  }

  size_t comment(size_t body) {
    const size_t end = src_.find("#}", body);
    if (end == std::string_view::npos) fail(line_at(body), "a comment {# is never closed with #}");
    const char marker = end > body && src_[end - 1] == '-' ? '-' : (end > body && src_[end - 1] == '+' ? '+' : '\0');
    return close_tag(end + 2, marker, true);
  }

  size_t tag_body(char kind, size_t pos) {
    const bool block = kind == '%';
    out_.push_back({block ? TokenKind::BlockBegin : TokenKind::VarBegin, "", line_at(pos)});
    const size_t first = out_.size();
    int depth = 0;
    while (true) {
      while (pos < src_.size() && is_space(src_[pos])) ++pos;
      if (pos >= src_.size()) fail(out_[first - 1].line, std::string("a tag ") + (block ? "{%" : "{{") + " is never closed");
      const std::string_view rest = src_.substr(pos);
      const std::string_view close = block ? "%}" : "}}";
      for (const char marker : {'-', '+', '\0'}) {
        const size_t skip = marker ? 1 : 0;
        if ((marker == 0 || rest[0] == marker) && rest.substr(skip, 2) == close && (block || depth == 0)) {
          out_.push_back({block ? TokenKind::BlockEnd : TokenKind::VarEnd, "", line_at(pos)});
          const size_t after = close_tag(pos + skip + 2, marker, block);
          return block && is_raw(first) ? raw_text(after) : after;
        }
      }
      pos = token(pos, line_at(pos), depth);
    }
  }

  bool is_raw(size_t first) const {
    return out_.size() == first + 2 && out_[first].kind == TokenKind::Name && out_[first].text == "raw";
  }

  // The text up to {% endraw %}, verbatim; the raw tag's tokens are dropped.
  size_t raw_text(size_t pos) {
    out_.resize(out_.size() - 3);  // BlockBegin raw BlockEnd
    for (size_t at = src_.find("{%", pos); at != std::string_view::npos; at = src_.find("{%", at + 2)) {
      size_t i = at + 2;
      const bool strip = i < src_.size() && src_[i] == '-';
      if (strip || (i < src_.size() && src_[i] == '+')) ++i;
      while (i < src_.size() && is_space(src_[i])) ++i;
      if (src_.substr(i, 6) != "endraw") continue;
      i += 6;
      while (i < src_.size() && is_space(src_[i])) ++i;
      const char marker = i < src_.size() && (src_[i] == '-' || src_[i] == '+') ? src_[i] : '\0';
      if (marker) ++i;
      if (src_.substr(i, 2) != "%}") continue;
      std::string text(src_.substr(pos, at - pos));
      if (strip) {
        while (!text.empty() && is_space(text.back())) text.pop_back();
      }
      emit_text(pos, std::move(text), '\0', false);
      return close_tag(i + 2, marker, true);
    }
    fail(line_at(pos), "{% raw %} is never closed with {% endraw %}");
  }

  size_t token(size_t pos, int line, int& depth) {
    const char c = src_[pos];
    if (is_name_start(c)) {
      size_t end = pos;
      while (end < src_.size() && is_name_char(src_[end])) ++end;
      out_.push_back({TokenKind::Name, std::string(src_.substr(pos, end - pos)), line});
      return end;
    }
    if (std::isdigit(static_cast<unsigned char>(c))) return number(pos, line);
    if (c == '\'' || c == '"') return string(pos, line);
    static const char* const two[] = {"**", "//", "==", "!=", "<=", ">="};
    for (const char* op : two) {
      if (src_.substr(pos, 2) == op) {
        out_.push_back({TokenKind::Op, op, line});
        return pos + 2;
      }
    }
    if (std::string_view("+-*/%~<>=()[]{},.:|").find(c) == std::string_view::npos)
      fail(line, std::string("unexpected character '") + c + "' inside a tag");
    depth += c == '{' ? 1 : (c == '}' ? -1 : 0);
    out_.push_back({TokenKind::Op, std::string(1, c), line});
    return pos + 1;
  }

  size_t number(size_t pos, int line) {
    size_t end = pos;
    bool is_float = false;
    auto digits = [&] {
      while (end < src_.size() && (std::isdigit(static_cast<unsigned char>(src_[end])) || src_[end] == '_')) ++end;
    };
    digits();
    if (end + 1 < src_.size() && src_[end] == '.' && std::isdigit(static_cast<unsigned char>(src_[end + 1]))) {
      is_float = true, ++end;
      digits();
    }
    if (end < src_.size() && (src_[end] == 'e' || src_[end] == 'E')) {
      size_t e = end + 1;
      if (e < src_.size() && (src_[e] == '+' || src_[e] == '-')) ++e;
      if (e < src_.size() && std::isdigit(static_cast<unsigned char>(src_[e]))) {
        is_float = true, end = e;
        digits();
      }
    }
    std::string text;
    for (char ch : src_.substr(pos, end - pos))
      if (ch != '_') text += ch;
    out_.push_back({is_float ? TokenKind::Float : TokenKind::Int, text, line});
    return end;
  }

  size_t string(size_t pos, int line) {
    const char quote = src_[pos];
    std::string value;
    size_t i = pos + 1;
    for (; i < src_.size() && src_[i] != quote; ++i) {
      if (src_[i] != '\\' || i + 1 >= src_.size()) {
        value += src_[i];
        continue;
      }
      const char e = src_[++i];
      switch (e) {
        case 'n': value += '\n'; break;
        case 't': value += '\t'; break;
        case 'r': value += '\r'; break;
        case '0': value += '\0'; break;
        case 'x':
        case 'u':
        case 'U': {
          const size_t n = e == 'x' ? 2 : (e == 'u' ? 4 : 8);
          const std::string hex(src_.substr(i + 1, n));
          if (hex.size() != n || hex.find_first_not_of("0123456789abcdefABCDEF") != std::string::npos)
            fail(line, std::string("a string's \\") + e + " escape needs " + std::to_string(n) + " hex digits");
          append_utf8(value, static_cast<uint32_t>(std::stoul(hex, nullptr, 16)));
          i += n;
          break;
        }
        case '\n': break;  // a backslash-newline continues the string
        default:
          if (e != '\\' && e != '\'' && e != '"') value += '\\';  // Python keeps unknown escapes
          value += e;
      }
    }
    if (i >= src_.size()) fail(line, "a string is never closed");
    out_.push_back({TokenKind::String, std::move(value), line});
    return i + 1;
  }

  std::string_view src_;
  LexOptions options_;
  std::vector<Token> out_;
  std::vector<size_t> newlines_;  // their offsets, for line numbers
  bool strip_left_ = false, trim_newline_ = false, at_line_start_ = true;
};

}  // namespace

std::vector<Token> lex(std::string_view source, const LexOptions& options) {
  // Jinja drops one newline at the very end of a template (keep_trailing_newline is off).
  if (source.size() >= 2 && source.substr(source.size() - 2) == "\r\n") source.remove_suffix(2);
  else if (!source.empty() && source.back() == '\n') source.remove_suffix(1);
  return Lexer(source, options).run();
}

}  // namespace dsx::jinja
