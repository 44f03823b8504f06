// Token data on disk, memory-mapped: llm.c token shards (1024-byte header of 256 int32: magic,
// version, token count; then the tokens) and plain text read as bytes (the byte-level tokenizer:
// token = byte value, vocabulary 256). Two shard kinds, as llm.c's dev/data/data_common.py writes
// them: GPT-2's (magic 20240520 train / 20240522 eval, version 1, uint16 tokens) and Llama 3's
// (magic 20240801, version 7, uint32 tokens) for vocabularies that do not fit in 16 bits.
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
    const uint32_t low = p[0] | (width_ > 1 ? p[1] << 8 : 0);
    return static_cast<int32_t>(width_ < 4 ? low : low | (p[2] << 16) | (static_cast<uint32_t>(p[3]) << 24));
  }
  size_t token_bytes() const { return width_; }  // 1 (text), 2 (GPT-2 shard) or 4 (Llama 3 shard)
  const std::string& path() const { return file_.path(); }

 private:
  TokenFile(MappedFile file, size_t offset, size_t width, size_t count)
      : file_(std::move(file)), offset_(offset), width_(width), count_(count) {}
  MappedFile file_;
  size_t offset_, width_, count_;
};

// The 1024-byte header of a shard of `count` tokens of `token_bytes` each (2: GPT-2's magic
// 20240520, or 20240522 with eval; 4: Llama 3's 20240801, version 7). Error(Usage) beyond 2^31-1
// tokens (the count is an int32) or for another width.
std::vector<int32_t> token_shard_header(uint64_t count, size_t token_bytes, bool eval = false);
// The token width a vocabulary needs: 2 when every id fits in uint16, else 4.
inline size_t shard_token_bytes(int64_t vocab_size) { return vocab_size <= 65536 ? 2 : 4; }

// Writes an llm.c token shard (uint16 tokens). eval selects the eval magic 20240522.
void write_token_shard(const std::string& path, const std::vector<uint16_t>& tokens, bool eval = false);
// Writes a Llama 3 llm.c shard (uint32 tokens, magic 20240801, version 7).
void write_token_shard(const std::string& path, const std::vector<uint32_t>& tokens);

// The files matching a glob pattern, sorted; Error(Io) when none match.
std::vector<std::string> glob_files(const std::string& pattern);

}  // namespace dsx::models
