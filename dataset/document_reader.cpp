// Chunked reading at document boundaries (see document_reader.h).
#include "dataset/document_reader.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "dsx/error.h"
#include "tokenizer/utf8.h"

namespace dsx::dataset {

DocumentReader::DocumentReader(std::string path, DocumentSplit split, size_t chunk_bytes,
                               size_t max_document_bytes)
    : path_(std::move(path)),
      split_(split),
      chunk_bytes_(std::max<size_t>(chunk_bytes, 1)),
      max_document_bytes_(std::max(max_document_bytes, chunk_bytes_)) {
  fd_ = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0) {
    throw Error(ErrorKind::Io, "input '" + path_ + "': cannot open (" + std::strerror(errno) +
                                   "); check the path");
  }
  struct stat st {};
  if (::fstat(fd_, &st) != 0 || S_ISDIR(st.st_mode)) {
    ::close(fd_);
    throw Error(ErrorKind::Io,
                "input '" + path_ + "': not a readable file; give text or .jsonl files");
  }
  file_bytes_ = static_cast<uint64_t>(st.st_size);
}

DocumentReader::~DocumentReader() {
  if (fd_ >= 0) {
    ::close(fd_);
  }
}

// Reads until buffer_[begin_, end_) holds `target` bytes or the file ends.
void DocumentReader::fill(size_t target) {
  if (begin_ > 0) {  // keep the unfinished tail, at the front
    std::memmove(buffer_.data(), buffer_.data() + begin_, end_ - begin_);
    end_ -= begin_, begin_ = 0;
  }
  if (buffer_.size() < target) {
    buffer_.resize(target);
  }
  while (end_ < target && !eof_) {
    ssize_t n = ::read(fd_, buffer_.data() + end_, target - end_);
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n < 0) {
      throw Error(ErrorKind::Io,
                  "input '" + path_ + "': read failed (" + std::strerror(errno) + ")");
    }
    if (n == 0) {
      eof_ = true;
    }
    end_ += static_cast<size_t>(n);
  }
}

// Checked here, where the file, the line and the offset in the file are known: a tokenizer could
// only name an offset inside whichever chunk or document it was handed.
void DocumentReader::require_utf8(std::string_view text) const {
  const auto bad = tokenizer::utf8::first_invalid_byte(text);
  if (!bad) return;
  const uint64_t line = line_ + static_cast<uint64_t>(std::count(text.begin(), text.begin() + *bad, '\n'));
  char hex[8];
  std::snprintf(hex, sizeof hex, "0x%02X", static_cast<unsigned char>(text[*bad]));
  throw Error(ErrorKind::Format, path_ + ":" + std::to_string(line) + ": not valid UTF-8 at byte offset " +
                                     std::to_string(offset_ + *bad) + " (" + hex +
                                     "); dsx reads UTF-8 text only: convert the file (iconv -f LATIN1 "
                                     "-t UTF-8, say) or drop that line");
}

bool DocumentReader::next(DocumentChunk& chunk) {
  chunk.documents.clear(), chunk.lines.clear(), chunk.bytes = 0;
  size_t target = chunk_bytes_;
  for (;;) {
    fill(target);
    if (begin_ == end_ && eof_) {
      return false;
    }
    std::string_view text(buffer_.data() + begin_, end_ - begin_);
    SplitResult r = split_documents(text, split_, line_, eof_);
    if (r.consumed > 0) {
      require_utf8(text.substr(0, r.consumed));
      chunk.documents = std::move(r.documents), chunk.lines = std::move(r.lines);
      chunk.bytes = r.consumed;
      begin_ += r.consumed, offset_ += r.consumed, line_ = r.next_line;
      return true;
    }
    // Not one whole document in the buffer: read more, up to the limit.
    if (target >= max_document_bytes_) {
      throw Error(ErrorKind::Format,
                  path_ + ":" + std::to_string(line_) + ": a document longer than " +
                      std::to_string(max_document_bytes_) +
                      " bytes, the most read as one; split it into smaller documents");
    }
    target = std::min(target * 2, max_document_bytes_);
  }
}

}  // namespace dsx::dataset
