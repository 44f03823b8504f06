// Each step maps the current list of pieces to a new one, as HF's PreTokenizedString::split.
// The behaviours follow HF's NormalizedString::split: the pattern cuts a piece into alternating
// match / non-match spans, then Isolated keeps all, Removed drops matches, MergedWithPrevious
// glues each match to the span before it, MergedWithNext to the span after it, and Contiguous
// glues consecutive spans of the same kind.
#include "tokenizer/pre_tokenizer.h"

#include <algorithm>

#include "dsx/replace_all.h"

namespace dsx::tokenizer {
namespace {

struct Span {
  size_t begin;
  size_t end;
  bool is_match;
};

// The piece as alternating spans: the matches and the gaps between them.
void cover_with_spans(std::string_view piece, const std::vector<TextSpan>& matches, bool invert,
                      std::vector<Span>& spans) {
  size_t prev = 0;
  for (const TextSpan& m : matches) {
    if (m.begin > prev) spans.push_back({prev, m.begin, invert});
    spans.push_back({m.begin, m.end, !invert});
    prev = m.end;
  }
  if (prev < piece.size()) spans.push_back({prev, piece.size(), invert});
}

void apply_behavior(SplitBehavior behavior, const std::vector<Span>& spans,
                    std::vector<Span>& out) {
  bool previous_match = false;
  switch (behavior) {
    case SplitBehavior::Isolated:
      out = spans;
      return;
    case SplitBehavior::Removed:
      for (const Span& s : spans) {
        if (!s.is_match) out.push_back(s);
      }
      return;
    case SplitBehavior::MergedWithPrevious:
      for (const Span& s : spans) {
        if (s.is_match && !previous_match && !out.empty()) {
          out.back().end = s.end;
        } else {
          out.push_back(s);
        }
        previous_match = s.is_match;
      }
      return;
    case SplitBehavior::MergedWithNext:
      for (size_t i = spans.size(); i-- > 0;) {
        const Span& s = spans[i];
        if (s.is_match && !previous_match && !out.empty()) {
          out.back().begin = s.begin;
        } else {
          out.push_back(s);
        }
        previous_match = s.is_match;
      }
      std::reverse(out.begin(), out.end());
      return;
    case SplitBehavior::Contiguous:
      for (size_t i = 0; i < spans.size(); ++i) {
        if (i > 0 && spans[i].is_match == previous_match) {
          out.back().end = spans[i].end;
        } else {
          out.push_back(spans[i]);
        }
        previous_match = spans[i].is_match;
      }
      return;
  }
}

}  // namespace

void PreTokenizer::apply_split(const PreTokenizeStep& step, std::string_view piece,
                               PreTokenizeScratch& scratch) const {
  scratch.matches.clear();
  step.regex->find_all(piece, scratch.matches);
  if (step.behavior == SplitBehavior::Isolated && !step.invert) {
    // The common case (every known model): matches and gaps, in order, no copies.
    size_t prev = 0;
    for (const TextSpan& m : scratch.matches) {
      if (m.begin > prev) scratch.next.push_back(piece.substr(prev, m.begin - prev));
      scratch.next.push_back(piece.substr(m.begin, m.end - m.begin));
      prev = m.end;
    }
    if (prev < piece.size()) scratch.next.push_back(piece.substr(prev));
    return;
  }
  std::vector<Span> spans;
  std::vector<Span> kept;
  cover_with_spans(piece, scratch.matches, step.invert, spans);
  apply_behavior(step.behavior, spans, kept);
  for (const Span& s : kept) {
    if (s.end > s.begin) scratch.next.push_back(piece.substr(s.begin, s.end - s.begin));
  }
}

bool PreTokenizer::splits_only_by_known_patterns() const {
  if (steps_.empty()) return false;
  for (const PreTokenizeStep& step : steps_) {
    if (step.kind != PreTokenizeStep::Kind::Split || step.behavior != SplitBehavior::Isolated ||
        step.invert) {
      return false;
    }
    const std::string& p = step.regex->pattern();
    if (p != kGpt2Pattern && p != kLlama3Pattern && p != kQwen2Pattern) return false;
  }
  return true;
}

// HF's Metaspace: spaces become the replacement, which is put before the piece as `prepend`
// says; with a splitter, the piece is then cut before each replacement (MergedWithNext).
void PreTokenizer::apply_metaspace(const PreTokenizeStep& step, std::string_view piece, bool first,
                                   PreTokenizeScratch& scratch) const {
  std::string text = replace_all(piece, " ", step.replacement);
  const bool prepend = step.prepend == MetaspacePrepend::Always || (step.prepend == MetaspacePrepend::First && first);
  if (prepend && !std::string_view(text).starts_with(step.replacement)) text.insert(0, step.replacement);
  scratch.owned.push_back(std::move(text));
  if (step.regex) {
    apply_split(step, scratch.owned.back(), scratch);
  } else {
    scratch.next.push_back(scratch.owned.back());
  }
}

void PreTokenizer::split(std::string_view text, PreTokenizeScratch& scratch, bool starts_the_input) const {
  scratch.pieces.clear();
  scratch.owned.clear();
  if (text.empty()) return;
  scratch.pieces.push_back(text);
  for (const PreTokenizeStep& step : steps_) {
    scratch.next.clear();
    for (size_t i = 0; i < scratch.pieces.size(); ++i) {
      const std::string_view piece = scratch.pieces[i];
      if (step.kind == PreTokenizeStep::Kind::Metaspace) {
        apply_metaspace(step, piece, starts_the_input && i == 0, scratch);
      } else if (step.kind == PreTokenizeStep::Kind::PrefixSpace) {
        if (piece.front() == ' ') {
          scratch.next.push_back(piece);
        } else {
          scratch.owned.push_back(" " + std::string(piece));
          scratch.next.push_back(scratch.owned.back());
        }
      } else {
        apply_split(step, piece, scratch);
      }
    }
    std::swap(scratch.pieces, scratch.next);
  }
}

}  // namespace dsx::tokenizer
