// The documents of one input file, read in chunks of about `chunk_bytes` cut at document
// boundaries (document_split.h), so a corpus larger than memory streams through one bounded
// buffer. A document longer than a chunk grows the buffer up to `max_document_bytes`; beyond
// that it is an error naming the file and line, as is text that is not UTF-8.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "dataset/document_split.h"

namespace dsx::dataset {

struct DocumentChunk {
  std::vector<std::string_view> documents;  // valid until the next call to next()
  std::vector<uint64_t> lines;              // the line each document starts on
  uint64_t bytes = 0;                       // input bytes this chunk took from the file
};

class DocumentReader {
 public:
  // Error(Io) when the file cannot be opened.
  DocumentReader(std::string path, DocumentSplit split, size_t chunk_bytes,
                 size_t max_document_bytes);
  ~DocumentReader();
  DocumentReader(const DocumentReader&) = delete;
  DocumentReader& operator=(const DocumentReader&) = delete;

  // The next complete documents; false when the file is done.
  bool next(DocumentChunk& chunk);
  uint64_t file_bytes() const { return file_bytes_; }
  const std::string& path() const { return path_; }

 private:
  void fill(size_t target);
  void require_utf8(std::string_view text) const;  // Error(Format) naming file, line and offset

  std::string path_;
  DocumentSplit split_;
  size_t chunk_bytes_, max_document_bytes_;
  int fd_ = -1;
  uint64_t file_bytes_ = 0;
  std::string buffer_;
  size_t begin_ = 0, end_ = 0;  // unread bytes are buffer_[begin_, end_)
  bool eof_ = false;
  uint64_t line_ = 1;    // the line buffer_[begin_] is on
  uint64_t offset_ = 0;  // the file offset of buffer_[begin_]
};

}  // namespace dsx::dataset
