// Small helpers the engine tests share: a file's bytes, the message of the dsx::Error a call
// throws, and a token shard to train on.
#pragma once

#include <cstdint>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "dsx/error.h"

namespace dsx::test {

// The whole file ("" when it cannot be read).
inline std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// The message of the dsx::Error `fn` throws, or "" when it throws none.
template <typename Fn>
std::string error_of(Fn&& fn) {
  try {
    fn();
  } catch (const dsx::Error& e) {
    return e.what();
  }
  return "";
}

// An llm.c token shard `dir`/train_000.bin (256 int32 header: magic 20240520, version 1, count;
// then uint16 tokens) and the tokenize.json dsx tokenize writes beside shards, for a model without
// a tokenizer. Returns the --data shards: pattern.
inline std::string write_token_shard(const std::string& dir, const std::vector<uint16_t>& tokens,
                                     int vocab) {
  std::vector<int32_t> header(256, 0);
  header[0] = 20240520, header[1] = 1, header[2] = static_cast<int32_t>(tokens.size());
  std::ofstream out(dir + "/train_000.bin", std::ios::binary);
  out.write(reinterpret_cast<const char*>(header.data()),
            static_cast<std::streamsize>(header.size() * sizeof(int32_t)));
  out.write(reinterpret_cast<const char*>(tokens.data()),
            static_cast<std::streamsize>(tokens.size() * sizeof(uint16_t)));
  std::ofstream(dir + "/tokenize.json") << "{\"vocab_size\": " << vocab << "}";
  return dir + "/train_*.bin";
}

}  // namespace dsx::test
