// A SentencePiece model (tokenizer.model: Llama 2, Mistral) through Google's sentencepiece
// library, behind the Tokenizer interface. The library does the normalization, byte fallback and
// merges; this class adds BOS / EOS as tokenizer_config.json says. Special-token strings in the
// text are text, as sentencepiece itself treats them. Where the model allows it (BPE that
// normalizes only spaces: Llama 2, Mistral; Unigram whose pieces stay inside words), text is
// encoded word by word through the word cache (sentencepiece_words.h,
// sentencepiece_unigram_words.h), with the library's ids.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace dsx::tokenizer {

struct SentencePieceRules {
  bool add_bos = true;  // Llama 2's and Mistral's default
  bool add_eos = false;
  std::optional<std::string> bos_token;  // overrides the model's own BOS piece
  std::optional<std::string> eos_token;
};

class SentencePieceTokenizer : public Tokenizer {
 public:
  // Throws dsx::Error (Io or Format) with sentencepiece's message when the model cannot load.
  SentencePieceTokenizer(const std::string& model_path, const SentencePieceRules& rules);
  ~SentencePieceTokenizer() override;

  void encode_into(std::string_view text, const EncodeOptions& options,
                   std::vector<TokenId>& out) const override;
  using Tokenizer::decode;
  std::string decode(std::span<const TokenId> ids, const DecodeOptions& options) const override;
  std::optional<TokenId> bos_id() const override { return bos_; }
  std::optional<TokenId> eos_id() const override { return eos_; }
  TokenId vocab_size() const override;
  std::optional<TokenId> token_to_id(std::string_view token) const override;
  std::string describe() const override;
  SpecialTokenTemplate special_template() const override;

 private:
  std::optional<TokenId> piece_id(const std::string& piece, const char* field) const;
  void encode_by_library(std::string_view text, std::vector<TokenId>& out) const;
  void encode_by_words(std::string_view text, std::vector<TokenId>& out) const;
  void encode_by_unigram_words(std::string_view text, std::vector<TokenId>& out) const;

  std::unique_ptr<sentencepiece::SentencePieceProcessor> processor_;
  std::string source_;
  std::optional<TokenId> bos_;
  std::optional<TokenId> eos_;
  bool add_bos_ = false;
  bool add_eos_ = false;
  bool by_words_ = false;                 // BPE (sentencepiece_words.h)
  bool by_unigram_words_ = false;         // Unigram (sentencepiece_unigram_words.h)
  std::vector<std::string> word_breaks_;  // where Unigram words start
  uint64_t cache_owner_;
};

}  // namespace dsx::tokenizer
