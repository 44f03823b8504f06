// Joining and splitting shell words.
#include "launcher/shell_words.h"

#include <cctype>
#include <cstring>

#include "dsx/error.h"
#include "dsx/shell_quote.h"

namespace dsx::launcher {

std::string shell_join(const std::vector<std::string>& words) {
  std::string out;
  for (const auto& w : words) {
    if (!out.empty()) out += ' ';
    out += shell_quote(w);
  }
  return out;
}

std::vector<std::string> shell_split(const std::string& text) {
  std::vector<std::string> words;
  std::string word;
  bool in_word = false;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (std::isspace(static_cast<unsigned char>(c))) {
      if (in_word) words.push_back(word);
      word.clear();
      in_word = false;
    } else if (c == '\'') {
      size_t end = text.find('\'', i + 1);
      if (end == std::string::npos) throw Error(ErrorKind::Usage, "unterminated ' in '" + text + "'");
      word += text.substr(i + 1, end - i - 1);
      i = end;
      in_word = true;
    } else if (c == '"') {
      ++i;
      while (i < text.size() && text[i] != '"') {
        if (text[i] == '\\' && i + 1 < text.size() && std::strchr("\\\"$`\n", text[i + 1])) ++i;
        word += text[i++];
      }
      if (i >= text.size()) throw Error(ErrorKind::Usage, "unterminated \" in '" + text + "'");
      in_word = true;
    } else if (c == '\\' && i + 1 < text.size()) {
      word += text[++i];
      in_word = true;
    } else {
      word += c;
      in_word = true;
    }
  }
  if (in_word) words.push_back(word);
  return words;
}

}  // namespace dsx::launcher
