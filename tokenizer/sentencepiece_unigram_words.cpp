// SentencePiece Unigram words (see sentencepiece_unigram_words.h).
#include "tokenizer/sentencepiece_unigram_words.h"

#include <sentencepiece_processor.h>

#include <algorithm>
#include <cmath>

#include "dsx/error.h"
#include "tokenizer/sentencepiece_words.h"

namespace dsx::tokenizer {
namespace {

using Type = SentencePieceSpec::ModelType;

// float's unit roundoff: one addition is off by at most this times its result's magnitude.
constexpr double kRoundoff = 0x1p-24;
// How many times the worst rounding of the two sums a margin must exceed (see the header).
constexpr double kSafety = 8;

bool whitespace_only(std::string_view text) {
  return text.find_first_not_of(" \t\n\r") == std::string_view::npos;
}

// The largest |S| at which `margin` still exceeds kSafety times the rounding of sums of
// `additions` terms, each of magnitude up to |S| + best + 1.
double max_prefix_for(double margin, double best, size_t additions) {
  if (std::isinf(margin)) return margin;
  return margin / (kSafety * double(additions) * kRoundoff) - best - 1;
}

}  // namespace

bool unigram_encodes_word_by_word(const SentencePieceModelFile& model) {
  const SentencePieceSpec& spec = model.spec;
  const bool cut_at_spaces = spec.remove_extra_whitespaces && spec.escape_whitespaces &&
                             spec.add_dummy_prefix && !spec.treat_whitespace_as_suffix &&
                             !spec.charsmap_rewrites_spaces;
  if (spec.model_type != Type::Unigram || !cut_at_spaces) return false;
  // The library merges neighbouring unknown pieces into one: the "▁" that starts a word must be a
  // piece, so that a word never starts with one.
  const bool space_is_a_piece =
      std::any_of(model.pieces.begin(), model.pieces.end(), [](const SentencePiecePiece& p) {
        return p.piece == "\xE2\x96\x81" && p.type == PieceType::Normal;
      });
  return space_is_a_piece && std::none_of(model.pieces.begin(), model.pieces.end(), [](const SentencePiecePiece& p) {
    return p.type == PieceType::UserDefined || joins_a_word_to_the_next(p.piece) ||
           (p.type == PieceType::Normal && !(p.score <= 0));
  });
}

UnigramWord encode_unigram_word(const sentencepiece::SentencePieceProcessor& library,
                                std::string_view input, const std::string& source) {
  sentencepiece::ImmutableNBestSentencePieceText best;
  auto status = library.NBestEncode(input, 2, best.mutable_proto());
  if (!status.ok() || best.nbests_size() == 0) {
    throw Error(ErrorKind::Internal,
                source + ": sentencepiece failed to encode: " + status.ToString());
  }
  const auto first = best.nbests(0);
  UnigramWord word;
  size_t normalized_bytes = 0;
  uint32_t end = 0;
  for (const auto& piece : first.pieces()) {
    word.ids.push_back(TokenId(piece.id()));
    normalized_bytes += piece.piece().size();
    end = std::max(end, piece.end());
  }
  word.joins_cleanly = word.ids.empty() ? whitespace_only(input) : end == input.size();
  word.best_score = std::fabs(double(first.score()));
  const double margin = best.nbests_size() < 2 ? std::numeric_limits<double>::infinity()
                                               : double(first.score()) - best.nbests(1).score();
  // A path has at most one node per byte; 4 more for the additions where the word meets its
  // neighbours.
  word.max_prefix_score = max_prefix_for(margin, word.best_score, normalized_bytes + 4);
  return word;
}

}  // namespace dsx::tokenizer
