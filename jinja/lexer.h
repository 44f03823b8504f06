// A template's source as tokens: the text between tags, the tag delimiters, and the names,
// literals and operators inside tags. The whitespace rules are applied here, as transformers
// configures Jinja for chat templates: trim_blocks (the newline after a block tag is dropped),
// lstrip_blocks (spaces and tabs before a block tag on its line are dropped), and the "-"
// markers ({%- -%} {{- -}}) that strip all whitespace on their side. One newline at the very end
// of the source is dropped, as Jinja does.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace dsx::jinja {

enum class TokenKind { Text, VarBegin, VarEnd, BlockBegin, BlockEnd, Name, String, Int, Float, Op, End };

struct Token {
  TokenKind kind;
  std::string text;  // the text, name, operator, or a literal's value (string unescaped)
  int line = 1;
};

struct LexOptions {
  bool trim_blocks = true;
  bool lstrip_blocks = true;
};

// Error(Format) "line N: ..." for an unclosed tag, comment or string.
std::vector<Token> lex(std::string_view source, const LexOptions& options = {});

}  // namespace dsx::jinja
