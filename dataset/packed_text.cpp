// run_clm-style packed text (see packed_text.h).
#include "dataset/packed_text.h"

#include "dataset/document_encoder.h"
#include "dataset/document_reader.h"
#include "dataset/tokenize_corpus.h"
#include "dsx/error.h"
#include "tokenizer/load_tokenizer.h"

namespace dsx::dataset {

std::vector<int32_t> tokenize_text_file(const tokenizer::Tokenizer& tokenizer,
                                        const std::string& path, const TextDataOptions& o) {
  const DocumentSplit split = split_for_path(path, o.split);
  DocumentEncoder encoder(tokenizer, o.threads);
  DocumentReader reader(path, split, o.chunk_bytes, std::max<size_t>(o.chunk_bytes, 256u << 20));
  std::vector<int32_t> ids;
  DocumentChunk chunk;
  std::vector<std::string> storage;
  while (reader.next(chunk)) {
    encoder.append_documents(document_texts(chunk.documents, chunk.lines, split, path, storage),
                             ids);
  }
  return ids;
}

PackedRows::PackedRows(std::vector<int32_t> tokens, int seq_len, std::string origin)
    : tokens_(std::move(tokens)), seq_len_(seq_len), origin_(std::move(origin)) {
  if (seq_len_ < 1) {
    throw Error(ErrorKind::Config, "packed text: seq_len must be positive");
  }
}

void PackedRows::row(size_t index, int32_t* inputs, int32_t* targets) const {
  const int32_t* t = tokens_.data() + index * (static_cast<size_t>(seq_len_) + 1);
  std::copy(t, t + seq_len_, inputs);
  std::copy(t + 1, t + seq_len_ + 1, targets);
}

std::string PackedRows::describe() const {
  return "text '" + origin_ + "' (" + std::to_string(tokens_.size()) + " tokens)";
}

std::unique_ptr<RowLoader> make_tokenized_text_loader(const std::string& path,
                                                      const tokenizer::Tokenizer& tokenizer,
                                                      const models::TokenLoaderOptions& options,
                                                      const TextDataOptions& text) {
  auto rows = std::make_unique<PackedRows>(tokenize_text_file(tokenizer, path, text),
                                           options.seq_len, path);
  return std::make_unique<RowLoader>(std::move(rows), options, tokenizer.vocab_size());
}

std::unique_ptr<RowLoader> make_tokenized_text_loader(const std::string& path,
                                                      const std::string& tokenizer_folder,
                                                      const models::TokenLoaderOptions& options,
                                                      const TextDataOptions& text) {
  auto tokenizer = tokenizer::load_tokenizer(tokenizer_folder);
  return make_tokenized_text_loader(path, *tokenizer, options, text);
}

}  // namespace dsx::dataset
