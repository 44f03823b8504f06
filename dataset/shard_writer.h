// llm.c token shards written as the tokens come: DIR/NAME_000000.bin, NAME_000001.bin, ... of
// `shard_tokens` tokens each (the last one shorter), uint16 or uint32 tokens
// (models/data/token_files.h). Memory stays one write's worth whatever the shard size. Each
// shard is written under a hidden temporary name, its header's count set at the end, fsynced
// and renamed: a killed run never leaves a half shard under a final name.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace dsx::dataset {

class ShardWriter {
 public:
  ShardWriter(std::string dir, std::string name, uint64_t shard_tokens, size_t token_bytes);
  ~ShardWriter();  // removes an unfinished temporary file
  ShardWriter(const ShardWriter&) = delete;
  ShardWriter& operator=(const ShardWriter&) = delete;

  // Error(Internal) for an id that does not fit the token width; Error(Io) on a failed write.
  void append(std::span<const int32_t> ids);
  void finish();  // commits the last, partial shard

  uint64_t tokens() const { return tokens_; }
  const std::vector<std::string>& files() const { return files_; }
  // The final name of shard `index`: DIR/NAME_000123.bin.
  std::string shard_path(uint64_t index) const;

 private:
  void open_shard();
  void commit_shard();
  void write_all(const void* data, size_t size);
  [[noreturn]] void fail(const std::string& what) const;

  std::string dir_, name_;
  uint64_t shard_tokens_;
  size_t token_bytes_;
  int fd_ = -1;
  std::string temp_path_;
  uint64_t in_shard_ = 0, tokens_ = 0;
  std::vector<std::string> files_;
  std::vector<uint8_t> staging_;
};

}  // namespace dsx::dataset
