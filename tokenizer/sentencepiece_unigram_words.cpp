// SentencePiece Unigram words (see sentencepiece_unigram_words.h).
#include "tokenizer/sentencepiece_unigram_words.h"

#include <sentencepiece_processor.h>

#include <algorithm>
#include <bitset>
#include <cmath>

#include "dsx/error.h"
#include "tokenizer/sentencepiece_words.h"

namespace dsx::tokenizer {
namespace {

using Type = SentencePieceSpec::ModelType;

constexpr std::string_view kEscapedSpace = "\xE2\x96\x81";  // U+2581

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
                             !spec.spaces_read_alone.empty() && spec.spaces_read_alone[0] == " ";
  if (spec.model_type != Type::Unigram || !cut_at_spaces) return false;
  // The library merges neighbouring unknown pieces into one: the "▁" that starts a word must be a
  // piece, so that a word never starts with one.
  const bool space_is_a_piece =
      std::any_of(model.pieces.begin(), model.pieces.end(), [](const SentencePiecePiece& p) {
        return p.piece == kEscapedSpace && p.type == PieceType::Normal;
      });
  return space_is_a_piece &&
         std::none_of(model.pieces.begin(), model.pieces.end(), [](const SentencePiecePiece& p) {
           return p.type == PieceType::UserDefined || joins_a_word_to_the_next(p.piece) ||
                  (p.type == PieceType::Normal && !(p.score <= 0));
         });
}

void unigram_words(std::string_view text, const std::vector<std::string>& spaces,
                   std::vector<std::string_view>& words) {
  // Which bytes start one of `spaces` (or "▁"): most bytes are not, and need no comparison.
  std::bitset<256> starts;
  for (const std::string& space : spaces) starts.set(static_cast<unsigned char>(space[0]));
  starts.set(static_cast<unsigned char>(kEscapedSpace[0]));
  auto space_at = [&](size_t at) -> size_t {
    for (const std::string& space : spaces) {
      if (text.compare(at, space.size(), space) == 0) return space.size();
    }
    return 0;
  };
  size_t start = 0;
  bool after_space = true;  // nothing to cut from before the first character
  for (size_t at = 0; at < text.size();) {
    if (!starts.test(static_cast<unsigned char>(text[at]))) {
      after_space = false;
      ++at;  // a byte at a time: no white space starts with a continuation byte
    } else if (const size_t length = space_at(at)) {
      if (!after_space && at + length < text.size()) {
        words.push_back(text.substr(start, at - start));
        start = at;
      }
      after_space = true;
      at += length;
    } else if (text.compare(at, kEscapedSpace.size(), kEscapedSpace) == 0) {
      after_space = true;  // "▁▁" may be one piece
      at += kEscapedSpace.size();
    } else {
      after_space = false;
      ++at;
    }
  }
  if (start < text.size()) words.push_back(text.substr(start));
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
