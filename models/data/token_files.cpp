// llm.c token shards and byte text, memory-mapped (see token_files.h).
#include "models/data/token_files.h"

#include <glob.h>

#include <cstring>

#include "dsx/error.h"

namespace dsx::models {

namespace {
constexpr int32_t kShardMagic = 20240520, kEvalShardMagic = 20240522, kShardVersion = 1;
constexpr int32_t kLlama3ShardMagic = 20240801, kLlama3ShardVersion = 7;  // uint32 tokens
constexpr size_t kHeaderBytes = 1024;

template <typename T>
void write_shard(const std::string& path, const std::vector<T>& tokens, bool eval) {
  std::vector<int32_t> h = token_shard_header(tokens.size(), sizeof(T), eval);
  AtomicWriter out(path);
  out.write(h.data(), h.size() * sizeof(int32_t));
  out.write(tokens.data(), tokens.size() * sizeof(T));
  out.commit();
}
}  // namespace

TokenFile TokenFile::open_shard(const std::string& path) {
  MappedFile f(path);
  auto bad = [&](const std::string& what) -> Error {
    return Error(ErrorKind::Format, "token shard '" + path + "': " + what +
                                        "; expected an llm.c shard (header magic 20240520, version 1, uint16 "
                                        "tokens; or magic 20240801, version 7, uint32 tokens)");
  };
  if (f.size() < kHeaderBytes) throw bad("shorter than the 1024-byte header");
  int32_t h[3];
  std::memcpy(h, f.data(), sizeof(h));
  const bool llama3 = h[0] == kLlama3ShardMagic;
  if (h[0] != kShardMagic && h[0] != kEvalShardMagic && !llama3) throw bad("magic " + std::to_string(h[0]));
  if (h[1] != (llama3 ? kLlama3ShardVersion : kShardVersion)) throw bad("version " + std::to_string(h[1]));
  const size_t width = llama3 ? 4 : 2;
  if (h[2] < 0) throw bad("the header says " + std::to_string(h[2]) + " tokens");
  const size_t expected = kHeaderBytes + width * static_cast<size_t>(h[2]);
  if (f.size() < expected)
    throw bad("the header says " + std::to_string(h[2]) + " tokens but the file has " +
              std::to_string(f.size()) + " bytes (truncated?)");
  if (f.size() > expected)
    throw bad("the header says " + std::to_string(h[2]) + " tokens but the file has " +
              std::to_string(f.size()) + " bytes, " + std::to_string(f.size() - expected) +
              " bytes more than the header's tokens (a header not updated after tokens were "
              "appended, or a different file)");
  return TokenFile(std::move(f), kHeaderBytes, width, static_cast<size_t>(h[2]));
}

TokenFile TokenFile::open_text(const std::string& path) {
  MappedFile f(path);
  size_t n = f.size();
  return TokenFile(std::move(f), 0, 1, n);
}

std::vector<int32_t> token_shard_header(uint64_t count, size_t token_bytes, bool eval) {
  if (count > 0x7fffffffu)
    throw Error(ErrorKind::Usage, "token shard of " + std::to_string(count) +
                                      " tokens: more than 2^31-1 (the header's int32); split it into several shards");
  if (token_bytes != 2 && token_bytes != 4)
    throw Error(ErrorKind::Internal, "token shard: tokens of " + std::to_string(token_bytes) + " bytes (2 or 4)");
  std::vector<int32_t> h(kHeaderBytes / sizeof(int32_t), 0);
  h[0] = token_bytes == 4 ? kLlama3ShardMagic : eval ? kEvalShardMagic : kShardMagic;
  h[1] = token_bytes == 4 ? kLlama3ShardVersion : kShardVersion;
  h[2] = static_cast<int32_t>(count);
  return h;
}

void write_token_shard(const std::string& path, const std::vector<uint16_t>& tokens, bool eval) {
  write_shard(path, tokens, eval);
}

void write_token_shard(const std::string& path, const std::vector<uint32_t>& tokens) {
  write_shard(path, tokens, false);
}

std::vector<std::string> glob_files(const std::string& pattern) {
  glob_t g{};
  int rc = ::glob(pattern.c_str(), 0, nullptr, &g);
  std::vector<std::string> files;
  if (rc == 0)
    for (size_t i = 0; i < g.gl_pathc; ++i) files.emplace_back(g.gl_pathv[i]);
  ::globfree(&g);
  if (files.empty())
    throw Error(ErrorKind::Io, "no file matches '" + pattern + "'; check the data path in the config");
  return files;  // glob sorts
}

}  // namespace dsx::models
