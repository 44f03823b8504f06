// Token ids of training documents: the tokenizer's prefix (BOS where its rules add one, as
// `encode` with add_special_tokens would), the text with special-token strings taken as text
// (nobody's data should inject control ids), then EOS so documents stay apart once
// concatenated. Batches are encoded on the tokenizer's thread pool (parallel_encode.h).
#pragma once

#include <span>
#include <string_view>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace dsx::dataset {

using tokenizer::TokenId;

class DocumentEncoder {
 public:
  // Error(Config) when the tokenizer has no EOS token. threads == 0: one per hardware thread.
  DocumentEncoder(const tokenizer::Tokenizer& tokenizer, unsigned threads);

  // The plain ids of each text (no BOS, no EOS), in parallel.
  std::vector<std::vector<TokenId>> encode_plain(std::span<const std::string_view> texts) const;
  // The ids of text a chat template wrote: the special-token strings in it are their ids, nothing
  // is added around it; in parallel.
  std::vector<std::vector<TokenId>> encode_templated(std::span<const std::string_view> texts) const;
  // Appends prefix + plain ids of each document + EOS, in order, to `out`; the ids of each
  // document start at the offsets pushed to `starts` (when given).
  void append_documents(std::span<const std::string_view> documents, std::vector<TokenId>& out,
                        std::vector<size_t>* starts = nullptr) const;

  const std::vector<TokenId>& prefix() const { return prefix_; }
  TokenId eos() const { return eos_; }
  const tokenizer::Tokenizer& tokenizer() const { return tokenizer_; }

 private:
  const tokenizer::Tokenizer& tokenizer_;
  unsigned threads_;
  std::vector<TokenId> prefix_;
  TokenId eos_;
};

}  // namespace dsx::dataset
