// Training documents to ids (see document_encoder.h).
#include "dataset/document_encoder.h"

#include "dsx/error.h"
#include "tokenizer/parallel_encode.h"

namespace dsx::dataset {

DocumentEncoder::DocumentEncoder(const tokenizer::Tokenizer& tokenizer, unsigned threads)
    : tokenizer_(tokenizer), threads_(threads), prefix_(tokenizer.special_template().prefix) {
  auto eos = tokenizer.eos_id();
  if (!eos) {
    throw Error(ErrorKind::Config,
                "tokenizer " + tokenizer.describe() +
                    " has no EOS token, which separates documents; set eos_token in its "
                    "tokenizer_config.json");
  }
  eos_ = *eos;
}

std::vector<std::vector<TokenId>> DocumentEncoder::encode_plain(
    std::span<const std::string_view> texts) const {
  tokenizer::EncodeOptions o;
  o.add_special_tokens = false, o.split_special_tokens = true;
  return tokenizer::encode_documents(tokenizer_, texts, o, threads_);
}

std::vector<std::vector<TokenId>> DocumentEncoder::encode_templated(
    std::span<const std::string_view> texts) const {
  tokenizer::EncodeOptions o;
  o.add_special_tokens = false, o.split_special_tokens = false;
  return tokenizer::encode_documents(tokenizer_, texts, o, threads_);
}

void DocumentEncoder::append_documents(std::span<const std::string_view> documents,
                                       std::vector<TokenId>& out,
                                       std::vector<size_t>* starts) const {
  tokenizer::EncodeOptions o;
  o.add_special_tokens = false, o.split_special_tokens = true;
  const TokenId eos[] = {eos_};
  tokenizer::append_documents(tokenizer_, documents, o, threads_, prefix_, eos, out, starts);
}

}  // namespace dsx::dataset
