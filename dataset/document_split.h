// Where the documents of a text buffer begin and end, for reading a corpus in chunks: only
// documents that are complete in the buffer are taken, so a chunk is always cut at a document
// boundary and the rest waits for the next read.
//
// Lines:      every line is a document, with its '\n' (run_clm.py over a `text` dataset: one
//             example per line, keep_linebreaks). Blank (whitespace-only) lines are skipped.
// Paragraphs: documents are separated by blank lines; a document is its lines, '\n's included.
// JsonLines:  every non-blank line is one JSON text (the caller parses it).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

namespace dsx::dataset {

enum class DocumentSplit { Lines, Paragraphs, JsonLines };

struct SplitResult {
  std::vector<std::string_view> documents;  // views into the buffer
  std::vector<uint64_t> lines;              // the 1-based line each document starts on
  size_t consumed = 0;                      // bytes of the buffer that are done with
  uint64_t next_line = 1;                   // the line number at `consumed`
};

// Splits `text`, whose first byte is on line `first_line`. With `at_end` the buffer holds the
// rest of the file, so a last line without '\n' (and an open paragraph) counts as complete.
SplitResult split_documents(std::string_view text, DocumentSplit split, uint64_t first_line,
                            bool at_end);

// Lines for .jsonl files, `fallback` for any other.
DocumentSplit split_for_path(std::string_view path, DocumentSplit fallback);

}  // namespace dsx::dataset
