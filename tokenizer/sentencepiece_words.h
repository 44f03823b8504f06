// Where a SentencePiece BPE model's text can be encoded word by word, so that words repeat and
// the word cache (word_cache.h) skips the library for most of them. Llama 2's and Mistral's
// models normalize nothing but spaces: the library sees "▁" + text with every ' ' as "▁", and
// merges adjacent symbols whose concatenation is a piece. When no piece holds a character other
// than "▁" followed by "▁", no merge crosses the start of a "▁" that follows another character,
// so the ids of the text are the ids of its words, each encoded alone:
//   "It is  so" -> "It" | " is" | "  so"; the library gets "It", "is", " so" (its dummy prefix
//   "▁" stands for the space the word starts with).
// BPE's merge order within a word does not depend on other words (each merge joins two
// neighbours, the best-scoring first, the leftmost among equals), so the ids are exactly the
// library's. Unigram models have their own rules (sentencepiece_unigram_words.h): their best path
// adds float scores along the whole text, and a sum's rounding may settle a near tie differently.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/sentencepiece_model_file.h"

namespace dsx::tokenizer {

// The piece holds a character other than "▁" directly followed by "▁": it may join a word to the
// next.
bool joins_a_word_to_the_next(std::string_view piece);

// Whether a model with these settings and pieces gives the same ids word by word.
bool encodes_word_by_word(const SentencePieceSpec& spec, const std::vector<std::string>& pieces);

// Cuts `text` before every ' ' that follows a character other than ' ' and "▁" and is not the
// last byte; the words, in order, are views into `text`. Empty text: no words.
void sentencepiece_words(std::string_view text, std::vector<std::string_view>& words);

// What the library encodes for the word at `index`: the first as it is, every later one without
// the ' ' it starts with (the dummy prefix stands for it).
inline std::string_view library_input(std::string_view word, size_t index) {
  return index == 0 ? word : word.substr(1);
}

}  // namespace dsx::tokenizer
