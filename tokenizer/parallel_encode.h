// Encoding on many threads with the ids of one thread: a list of documents (each encoded
// alone, as a batch), or one large text cut into chunks where the cut cannot change the ids.
// A tokenizer that cannot promise that (SentencePiece, an unknown pre-tokenizer regex) is
// encoded in one piece.
#pragma once

#include <span>
#include <string_view>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace dsx::tokenizer {

// threads == 0: one per hardware thread.
std::vector<std::vector<TokenId>> encode_documents(const Tokenizer& tokenizer,
                                                   std::span<const std::string_view> documents,
                                                   const EncodeOptions& options, unsigned threads);

// Appends, for each document in order, `before`, its ids and `after` to `out`, and the offset in
// `out` where each document's `before` starts to `starts` (when given). The same ids as
// encode_documents, without its vector per document: runs of consecutive documents (about 64 KiB
// of text each) are encoded into buffers that the calling thread keeps from one call to the next,
// so a corpus of short lines costs no allocation, page fault or copy per document.
void append_documents(const Tokenizer& tokenizer, std::span<const std::string_view> documents,
                      const EncodeOptions& options, unsigned threads,
                      std::span<const TokenId> before, std::span<const TokenId> after,
                      std::vector<TokenId>& out, std::vector<size_t>* starts = nullptr);

// The same ids as tokenizer.encode(text, options).
std::vector<TokenId> encode_large_text(const Tokenizer& tokenizer, std::string_view text,
                                       const EncodeOptions& options, unsigned threads);

// Where encode_large_text cuts `text` into pieces of about `target` bytes: after a '\n' that
// follows a printable non-space ASCII character and precedes an ASCII letter. Offsets of the
// chunk starts after the first (which starts at 0).
std::vector<size_t> line_start_cuts(std::string_view text, size_t target);

}  // namespace dsx::tokenizer
