// `dsx tokenize`'s pipeline: text and JSONL files to llm.c token shards, streamed. Each file is
// read in chunks cut at document boundaries (document_reader.h), each chunk's documents are
// encoded in parallel (document_encoder.h: BOS where the tokenizer adds one, EOS after every
// document) and appended to the shards (shard_writer.h), so memory stays about a chunk and its
// ids whatever the corpus size. Documents: a line of a text file (or a paragraph, with
// DocumentSplit::Paragraphs); the "text" string of each line of a .jsonl file.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "dataset/document_split.h"
#include "tokenizer/tokenizer.h"

namespace dsx::dataset {

struct TokenizeOptions {
  std::vector<std::string> files;
  std::string out_dir;
  uint64_t shard_tokens = 100'000'000;  // llm.c's fineweb shards
  unsigned threads = 0;                 // 0: one per hardware thread
  size_t chunk_bytes = 16u << 20;       // input read per step
  size_t max_document_bytes = 256u << 20;
  DocumentSplit text_split = DocumentSplit::Lines;  // for files other than .jsonl
  double val_fraction = 0;  // this share of the documents, spread evenly, goes to val_*.bin
};

struct TokenizeProgress {
  uint64_t bytes_read = 0, bytes_total = 0;
  uint64_t documents = 0, tokens = 0, shards = 0;
  double seconds = 0;
};

struct TokenizeSummary {
  TokenizeProgress totals;
  size_t files = 0;
  size_t token_bytes = 2;  // 2 (uint16, GPT-2's shard) or 4 (uint32, Llama 3's)
  uint64_t val_documents = 0, val_tokens = 0;
  std::vector<std::string> train_shards, val_shards;
};

// Error(Io) for a missing input or an --out that cannot be written, Error(Format) for a bad
// JSONL line (FILE:LINE) or input without a single document, Error(Config) when out_dir already
// holds shards. `on_progress` is called after every chunk.
TokenizeSummary tokenize_corpus(
    const tokenizer::Tokenizer& tokenizer, const TokenizeOptions& options,
    const std::function<void(const TokenizeProgress&)>& on_progress = {});

// The documents of a chunk as text: the lines themselves, or for JsonLines the "text" strings
// (decoded into `storage`). Error(Format) naming FILE:LINE for a line without a "text" string.
std::vector<std::string_view> document_texts(const std::vector<std::string_view>& documents,
                                             const std::vector<uint64_t>& lines,
                                             DocumentSplit split, const std::string& path,
                                             std::vector<std::string>& storage);

}  // namespace dsx::dataset
