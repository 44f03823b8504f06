// transformers 5.25's rules (models/llama/tokenization_llama.py, SentencePieceExtractor and
// generate_merges in transformers), restated:
// - vocabulary: every piece, id = its index;
// - merges: for each piece, each split into two pieces of the vocabulary, ranked by the merged
//   piece's id, then by the left part's length in characters;
// - BPE with byte_fallback and fuse_unk, no unk token;
// - no normalizer; Metaspace("▁", split false) that prepends "▁" to a piece that does not already
//   start with one: "never" with add_prefix_space false, else "always" with legacy true, else
//   "first" (only at the start of the text, not after an added token). sentencepiece always
//   prepends, so " Hello" is "▁▁Hello" there and "▁Hello" here;
// - added tokens: the unknown and control pieces (special) and the user-defined ones (not
//   special), matched on the raw text;
// - decoder: "▁" back to spaces, byte fallback, fuse, and one leading space stripped when a
//   prefix space was added.
#include "tokenizer/llama_tokenizer_from_model.h"

#include <algorithm>
#include <tuple>

#include "tokenizer/utf8.h"

namespace dsx::tokenizer {
namespace {

constexpr const char* kMetaspace = "\xE2\x96\x81";  // U+2581

std::vector<std::pair<std::string, std::string>> merges_from_vocabulary(const Vocabulary& vocab) {
  struct Merge {
    TokenId merged;
    size_t left_chars;
    std::string left, right;
  };
  std::vector<Merge> merges;
  for (const auto& [piece, id] : vocab) {
    size_t chars = 0;
    for (size_t cut = 0; cut < piece.size();) {
      cut += utf8::decode_at(piece, cut).length;
      ++chars;
      if (cut == piece.size()) break;
      std::string left = piece.substr(0, cut), right = piece.substr(cut);
      if (vocab.count(left) && vocab.count(right))
        merges.push_back({id, chars, std::move(left), std::move(right)});
    }
  }
  std::sort(merges.begin(), merges.end(), [](const Merge& a, const Merge& b) {
    return std::tie(a.merged, a.left_chars) < std::tie(b.merged, b.left_chars);
  });
  std::vector<std::pair<std::string, std::string>> out;
  out.reserve(merges.size());
  for (Merge& m : merges) out.emplace_back(std::move(m.left), std::move(m.right));
  return out;
}

MetaspacePrepend prepend_rule(const LlamaTokenizerSwitches& switches) {
  if (!switches.add_prefix_space.value_or(true)) return MetaspacePrepend::Never;
  return switches.legacy.value_or(false) ? MetaspacePrepend::Always : MetaspacePrepend::First;
}

}  // namespace

HfBpeParts llama_tokenizer_from_model(const SentencePieceModelFile& model,
                                      const LlamaTokenizerSwitches& switches,
                                      const std::string& source) {
  HfBpeParts parts;
  parts.source = source;
  Vocabulary vocab;
  for (size_t id = 0; id < model.pieces.size(); ++id) {
    const SentencePiecePiece& p = model.pieces[id];
    // A repeated piece keeps its last id, as transformers' dict does.
    vocab[p.piece] = static_cast<TokenId>(id);
    if (p.type == PieceType::Unknown || p.type == PieceType::Control ||
        p.type == PieceType::UserDefined) {
      AddedToken token;
      token.id = static_cast<TokenId>(id);
      token.content = p.piece;
      token.special = p.type != PieceType::UserDefined;
      parts.added_tokens.push_back(std::move(token));
    }
  }
  auto merges = merges_from_vocabulary(vocab);
  BpeOptions options;
  options.byte_fallback = true;
  options.fuse_unk = true;
  parts.model = std::make_unique<BpeModel>(std::move(vocab), merges, options, source);

  const MetaspacePrepend prepend = prepend_rule(switches);
  parts.pre_tokenizer.add_step({PreTokenizeStep::Kind::Metaspace, nullptr,
                                SplitBehavior::MergedWithNext, false, kMetaspace, prepend});
  parts.decoder.add({DecodeStep::Kind::Replace, kMetaspace, " "});
  parts.decoder.add({DecodeStep::Kind::ByteFallback, {}, {}});
  parts.decoder.add({DecodeStep::Kind::Fuse, {}, {}});
  if (prepend != MetaspacePrepend::Never)
    parts.decoder.add({DecodeStep::Kind::Strip, " ", {}, 1, 0});
  return parts;
}

}  // namespace dsx::tokenizer
