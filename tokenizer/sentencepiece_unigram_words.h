// Where a SentencePiece Unigram model's text can be encoded word by word through the word cache,
// with the ids the library gives the whole text. A word starts at white space that follows another
// character, where the white space is a character the normalizer always reads alone as " "
// (sentencepiece_charsmap.h: ' ', and under NFKC also tab, newline, U+00A0, U+3000).
//
// Normalization: with remove_extra_whitespaces and a dummy "▁", the whole text normalizes to its
// words' normalized forms one after another (the white space a word starts with becomes its "▁"),
// provided each word but the last ends in a character of its own (nothing at its end was dropped
// as trailing space: the library's pieces reach its last byte) and a word that normalizes to
// nothing is plain white space.
//
// Best path: when no piece holds a character followed by "▁", every path of the whole text passes
// the "▁" that starts each word, so in exact arithmetic the best path is the words' best paths.
// The library adds float scores along the whole text, though: inside a word, its sums start from
// the score S of the text before it, and rounding there (up to about |S| * 2^-24 an addition)
// may settle a near tie differently than the word alone does. So each word keeps the margin
// between its best and second-best segmentations (the library's 2-best), and is used only while
// that margin exceeds 8 times the rounding the sums can gather at the document's |S| (at least
// twice what the whole text and the word alone can each be off); otherwise the document goes to
// the library whole. Exact ties always go whole.
#pragma once

#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/bpe_model.h"
#include "tokenizer/sentencepiece_model_file.h"

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace dsx::tokenizer {

// Whether a Unigram model with these settings and pieces may be encoded word by word (no user
// defined pieces, whose scores the library computes apart; no positive score; "▁" a piece).
bool unigram_encodes_word_by_word(const SentencePieceModelFile& model);

// Cuts `text` before every character of `spaces` that follows a character other than those and
// "▁" and is not the last; the words, in order, are views into `text`, each to be given to the
// library as it is.
void unigram_words(std::string_view text, const std::vector<std::string>& spaces,
                   std::vector<std::string_view>& words);

struct UnigramWord {
  std::vector<TokenId> ids;
  double best_score = 0;  // -(score of its best path): what it adds to the |S| of later words
  // The largest |S| of the text before it at which its ids are the library's in context.
  double max_prefix_score = std::numeric_limits<double>::infinity();
  bool joins_cleanly = true;  // another word may follow it (see the opening comment)

  bool fits_after(double prefix_score, bool last) const {
    return prefix_score <= max_prefix_score && (last || joins_cleanly);
  }
};

// The library's ids for `input` (a word of unigram_words) with what the checks above
// need. Throws dsx::Error (Internal) when the library fails; `source` names the model.
UnigramWord encode_unigram_word(const sentencepiece::SentencePieceProcessor& library,
                                std::string_view input, const std::string& source);

}  // namespace dsx::tokenizer
