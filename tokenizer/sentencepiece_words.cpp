// SentencePiece words (see sentencepiece_words.h).
#include "tokenizer/sentencepiece_words.h"

namespace dsx::tokenizer {
namespace {

constexpr std::string_view kSpace = "\xE2\x96\x81";  // U+2581, SentencePiece's escaped space

}  // namespace

bool joins_a_word_to_the_next(std::string_view piece) {
  for (size_t pos = piece.find(kSpace); pos != std::string_view::npos;
       pos = piece.find(kSpace, pos + kSpace.size())) {
    if (pos > 0 && !piece.substr(0, pos).ends_with(kSpace)) return true;
  }
  return false;
}

bool encodes_word_by_word(const SentencePieceSpec& spec, const std::vector<std::string>& pieces) {
  // Only spaces change in normalization, each to "▁", with a "▁" put before the text.
  const bool spaces_only = !spec.has_charsmap && !spec.remove_extra_whitespaces &&
                           spec.escape_whitespaces && spec.add_dummy_prefix &&
                           !spec.treat_whitespace_as_suffix;
  if (spec.model_type != SentencePieceSpec::ModelType::Bpe || !spaces_only) return false;
  for (const std::string& piece : pieces) {
    if (joins_a_word_to_the_next(piece)) return false;
  }
  return true;
}

void sentencepiece_words(std::string_view text, std::vector<std::string_view>& words) {
  size_t start = 0;
  for (size_t pos = text.find(' ', 1); pos != std::string_view::npos && pos + 1 < text.size();
       pos = text.find(' ', pos + 1)) {
    if (text[pos - 1] == ' ' || text.substr(0, pos).ends_with(kSpace)) continue;
    words.push_back(text.substr(start, pos - start));
    start = pos;
  }
  if (start < text.size()) words.push_back(text.substr(start));
}

}  // namespace dsx::tokenizer
