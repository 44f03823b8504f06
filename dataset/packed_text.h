// Text for causal-LM training, as run_clm.py's tokenize_function and group_texts make it:
// every document (a line of the file, as the `text` dataset gives run_clm one example per line;
// or a paragraph; or each "text" of a .jsonl) through the tokenizer (BOS where its rules add
// one), then EOS after each - dsx's addition, so documents stay apart - all concatenated and cut
// into consecutive rows of seq_len + 1 tokens (inputs = the first seq_len, targets = the last
// seq_len), the remainder dropped. The whole file's ids are held in memory (4 bytes a token);
// for corpora larger than that, `dsx tokenize` to shards and train on shards:GLOB.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "dataset/document_split.h"
#include "dataset/row_loader.h"
#include "models/data/loader.h"
#include "models/data/token_loader.h"
#include "tokenizer/tokenizer.h"

namespace dsx::dataset {

struct TextDataOptions {
  DocumentSplit split = DocumentSplit::Lines;  // for files other than .jsonl
  unsigned threads = 0;                        // encoding threads; 0: one per hardware thread
  size_t chunk_bytes = 16u << 20;              // read and encoded per step
};

// The concatenated ids of the file's documents, each prefix + text + EOS.
std::vector<int32_t> tokenize_text_file(const tokenizer::Tokenizer& tokenizer,
                                        const std::string& path,
                                        const TextDataOptions& options = {});

// Rows of seq_len + 1 consecutive tokens: row i holds tokens[i*(T+1) .. (i+1)*(T+1)).
class PackedRows final : public RowSource {
 public:
  PackedRows(std::vector<int32_t> tokens, int seq_len, std::string origin);
  size_t rows() const override { return tokens_.size() / (static_cast<size_t>(seq_len_) + 1); }
  int seq_len() const override { return seq_len_; }
  void row(size_t index, int32_t* inputs, int32_t* targets) const override;
  std::string describe() const override;
  size_t tokens() const { return tokens_.size(); }

 private:
  std::vector<int32_t> tokens_;
  int seq_len_;
  std::string origin_;
};

// --data text:FILE through a tokenizer: this rank's packed rows (options.seq_len positions each,
// options.batch rows a micro-batch), vocab_size() the tokenizer's.
std::unique_ptr<RowLoader> make_tokenized_text_loader(const std::string& path,
                                                      const tokenizer::Tokenizer& tokenizer,
                                                      const models::TokenLoaderOptions& options,
                                                      const TextDataOptions& text = {});
// The same with the tokenizer of a model folder (load_tokenizer).
std::unique_ptr<RowLoader> make_tokenized_text_loader(const std::string& path,
                                                      const std::string& tokenizer_folder,
                                                      const models::TokenLoaderOptions& options,
                                                      const TextDataOptions& text = {});

}  // namespace dsx::dataset
