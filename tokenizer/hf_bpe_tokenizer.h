// A Hugging Face tokenizer.json with a BPE model, run as HF tokenizers does (encode order from
// added_vocabulary.rs): cut out non-normalized added tokens, normalize the rest, cut out the
// normalized added tokens, pre-tokenize, BPE each pre-token, then add the post-processor's
// tokens around the whole. read_tokenizer_json.h builds one from a file.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "tokenizer/added_tokens.h"
#include "tokenizer/bpe_model.h"
#include "tokenizer/decoder.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/tokenizer.h"

namespace dsx::tokenizer {

struct HfBpeParts {
  std::string source;  // the tokenizer.json path, for messages
  Normalizer normalizer;
  PreTokenizer pre_tokenizer;
  std::unique_ptr<BpeModel> model;
  Decoder decoder;
  std::vector<AddedToken> added_tokens;
  SpecialTokenTemplate special_template;
  std::optional<TokenId> bos;
  std::optional<TokenId> eos;
};

class HfBpeTokenizer : public Tokenizer {
 public:
  explicit HfBpeTokenizer(HfBpeParts parts);

  void encode_into(std::string_view text, const EncodeOptions& options,
                   std::vector<TokenId>& out) const override;
  using Tokenizer::decode;
  std::string decode(std::span<const TokenId> ids, const DecodeOptions& options) const override;
  std::optional<TokenId> bos_id() const override { return parts_.bos; }
  std::optional<TokenId> eos_id() const override { return parts_.eos; }
  TokenId vocab_size() const override { return vocab_size_; }
  std::optional<TokenId> token_to_id(std::string_view token) const override;
  std::string describe() const override;
  // TemplateProcessing's single template, or tokenizer_config.json's add_bos/eos_token.
  SpecialTokenTemplate special_template() const override { return parts_.special_template; }
  bool cuts_at_line_starts() const override { return cuts_at_line_starts_; }

  const HfBpeParts& parts() const { return parts_; }

 private:
  // `starts_the_input`: `text` begins at the start of what encode_into was given.
  void encode_normalized(std::string_view text, bool starts_the_input, std::vector<TokenId>& out) const;
  void encode_pre_token(std::string_view piece, std::vector<TokenId>& out) const;

  HfBpeParts parts_;
  std::unique_ptr<AddedTokenMatcher> raw_matcher_;         // normalized == false
  std::unique_ptr<AddedTokenMatcher> normalized_matcher_;  // normalized == true
  std::unordered_map<TokenId, size_t> added_by_id_;        // index in parts_.added_tokens
  TokenId vocab_size_ = 0;
  uint64_t cache_owner_;
  bool cuts_at_line_starts_ = false;
};

}  // namespace dsx::tokenizer
