// The encode pipeline; the JSON is read elsewhere (read_tokenizer_json.cpp).
#include "tokenizer/hf_bpe_tokenizer.h"

#include <cctype>

#include "tokenizer/byte_level.h"
#include "tokenizer/utf8.h"
#include "tokenizer/word_cache.h"

namespace dsx::tokenizer {

HfBpeTokenizer::HfBpeTokenizer(HfBpeParts parts)
    : parts_(std::move(parts)), cache_owner_(WordCache::new_owner()) {
  std::vector<AddedToken> raw, normalized;
  std::vector<std::string> raw_patterns, normalized_patterns;
  for (const AddedToken& token : parts_.added_tokens) {
    if (token.normalized) {
      std::string buffer;
      normalized_patterns.emplace_back(parts_.normalizer.apply(token.content, buffer));
      normalized.push_back(token);
    } else {
      raw_patterns.push_back(token.content);
      raw.push_back(token);
    }
  }
  raw_matcher_ = std::make_unique<AddedTokenMatcher>(std::move(raw), std::move(raw_patterns));
  normalized_matcher_ =
      std::make_unique<AddedTokenMatcher>(std::move(normalized), std::move(normalized_patterns));
  cuts_at_line_starts_ = parts_.pre_tokenizer.splits_only_by_known_patterns();
  for (const AddedToken& token : parts_.added_tokens) {
    // A token with '\n' could span a cut; one that lstrips and starts with a letter could take
    // the '\n' before the cut into itself.
    bool starts_with_letter = std::isalpha(static_cast<unsigned char>(token.content[0]));
    if (token.content.find('\n') != std::string::npos || (token.lstrip && starts_with_letter)) {
      cuts_at_line_starts_ = false;
    }
  }
  vocab_size_ = parts_.model->max_id() + 1;
  for (size_t i = 0; i < parts_.added_tokens.size(); ++i) {
    added_by_id_[parts_.added_tokens[i].id] = i;
    vocab_size_ = std::max(vocab_size_, parts_.added_tokens[i].id + 1);
  }
}

void HfBpeTokenizer::encode_pre_token(std::string_view piece, std::vector<TokenId>& out) const {
  WordCache& cache = WordCache::for_thread(cache_owner_);
  if (const auto* ids = cache.find(piece)) {
    out.insert(out.end(), ids->begin(), ids->end());
    return;
  }
  size_t start = out.size();
  if (parts_.pre_tokenizer.byte_level()) {
    parts_.model->encode_word(byte_level::to_alphabet(piece), out);
  } else {
    parts_.model->encode_word(piece, out);
  }
  cache.insert(piece, out.data() + start, out.size() - start);
}

void HfBpeTokenizer::encode_normalized(std::string_view text, bool starts_the_input,
                                       std::vector<TokenId>& out) const {
  thread_local PreTokenizeScratch scratch;
  parts_.pre_tokenizer.split(text, scratch, starts_the_input);
  for (std::string_view piece : scratch.pieces) encode_pre_token(piece, out);
}

void HfBpeTokenizer::encode_into(std::string_view text, const EncodeOptions& options,
                                 std::vector<TokenId>& out) const {
  utf8::require_valid(text, "the text to encode");
  const auto& tmpl = parts_.special_template;
  if (options.add_special_tokens) out.insert(out.end(), tmpl.prefix.begin(), tmpl.prefix.end());
  std::vector<TextPiece> raw_pieces;
  raw_matcher_->split(text, options.split_special_tokens, raw_pieces);
  std::string normalized_buffer;
  std::vector<TextPiece> pieces;
  for (const TextPiece& raw : raw_pieces) {
    if (raw.id) {
      out.push_back(*raw.id);
      continue;
    }
    std::string_view normalized =
        parts_.normalizer.apply(text.substr(raw.begin, raw.end - raw.begin), normalized_buffer);
    pieces.clear();
    normalized_matcher_->split(normalized, options.split_special_tokens, pieces);
    for (const TextPiece& piece : pieces) {
      if (piece.id) {
        out.push_back(*piece.id);
      } else {
        encode_normalized(normalized.substr(piece.begin, piece.end - piece.begin), raw.begin == 0 && piece.begin == 0,
                          out);
      }
    }
  }
  if (options.add_special_tokens) out.insert(out.end(), tmpl.suffix.begin(), tmpl.suffix.end());
}

std::string HfBpeTokenizer::decode(std::span<const TokenId> ids,
                                   const DecodeOptions& options) const {
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (TokenId id : ids) {
    const std::string* token = nullptr;
    if (auto it = added_by_id_.find(id); it != added_by_id_.end()) {
      const AddedToken& added = parts_.added_tokens[it->second];
      if (options.skip_special_tokens && added.special) continue;
      token = &added.content;
    } else {
      token = parts_.model->id_to_token(id);
    }
    if (token) tokens.push_back(*token);  // an id outside the vocabulary decodes to nothing, as in HF
  }
  return parts_.decoder.decode(std::move(tokens));
}

std::optional<TokenId> HfBpeTokenizer::token_to_id(std::string_view token) const {
  for (const AddedToken& added : parts_.added_tokens) {
    if (added.content == token) return added.id;
  }
  return parts_.model->token_to_id(token);
}

std::string HfBpeTokenizer::describe() const {
  return std::string(parts_.pre_tokenizer.byte_level() ? "byte-level BPE" : "BPE") + " from " +
         parts_.source + " (vocab " + std::to_string(vocab_size_) + ", " +
         std::to_string(parts_.model->merge_count()) + " merges, " +
         std::to_string(parts_.added_tokens.size()) + " added tokens)";
}

}  // namespace dsx::tokenizer
