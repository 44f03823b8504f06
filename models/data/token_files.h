// Token data on disk, memory-mapped: llm.c token shards (1024-byte header of 256 int32: magic
// 20240520 train / 20240522 eval, version 1, token count; then uint16 tokens) and plain text read
// as bytes (the byte-level tokenizer: token = byte value, vocabulary 256).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "models/io/files.h"

namespace dsx::models {

class TokenFile {
 public:
  static TokenFile open_shard(const std::string& path);  // Error(Format) on a bad header or size
  static TokenFile open_text(const std::string& path);   // every byte a token
  size_t size() const { return count_; }
  int32_t operator[](size_t i) const {
    const uint8_t* p = file_.data() + offset_ + i * width_;
    return width_ == 1 ? p[0] : static_cast<int32_t>(p[0] | (p[1] << 8));
  }
  const std::string& path() const { return file_.path(); }

 private:
  TokenFile(MappedFile file, size_t offset, size_t width, size_t count)
      : file_(std::move(file)), offset_(offset), width_(width), count_(count) {}
  MappedFile file_;
  size_t offset_, width_, count_;
};

// Writes an llm.c token shard (uint16 tokens). eval selects the eval magic 20240522.
void write_token_shard(const std::string& path, const std::vector<uint16_t>& tokens, bool eval = false);

// The files matching a glob pattern, sorted; Error(Io) when none match.
std::vector<std::string> glob_files(const std::string& pattern);

}  // namespace dsx::models
