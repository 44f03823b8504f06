// llm.c token shards and byte text, memory-mapped (see token_files.h).
#include "models/data/token_files.h"

#include <glob.h>

#include <cstring>

#include "dsx/error.h"

namespace dsx::models {

namespace {
constexpr int32_t kShardMagic = 20240520, kEvalShardMagic = 20240522, kShardVersion = 1;
constexpr size_t kHeaderBytes = 1024;
}  // namespace

TokenFile TokenFile::open_shard(const std::string& path) {
  MappedFile f(path);
  auto bad = [&](const std::string& what) -> Error {
    return Error(ErrorKind::Format, "token shard '" + path + "': " + what +
                                        "; expected an llm.c shard (header magic 20240520, version 1, uint16 tokens)");
  };
  if (f.size() < kHeaderBytes) throw bad("shorter than the 1024-byte header");
  int32_t h[3];
  std::memcpy(h, f.data(), sizeof(h));
  if (h[0] != kShardMagic && h[0] != kEvalShardMagic) throw bad("magic " + std::to_string(h[0]));
  if (h[1] != kShardVersion) throw bad("version " + std::to_string(h[1]));
  if (h[2] < 0 || f.size() != kHeaderBytes + 2 * static_cast<size_t>(h[2]))
    throw bad("the header says " + std::to_string(h[2]) + " tokens but the file has " +
              std::to_string(f.size()) + " bytes (truncated?)");
  return TokenFile(std::move(f), kHeaderBytes, 2, static_cast<size_t>(h[2]));
}

TokenFile TokenFile::open_text(const std::string& path) {
  MappedFile f(path);
  size_t n = f.size();
  return TokenFile(std::move(f), 0, 1, n);
}

void write_token_shard(const std::string& path, const std::vector<uint16_t>& tokens, bool eval) {
  if (tokens.size() > 0x7fffffffu)
    throw Error(ErrorKind::Usage, "token shard '" + path + "': more than 2^31 tokens; split it into several shards");
  int32_t h[256] = {};
  h[0] = eval ? kEvalShardMagic : kShardMagic, h[1] = kShardVersion, h[2] = static_cast<int32_t>(tokens.size());
  AtomicWriter out(path);
  out.write(h, sizeof(h));
  out.write(tokens.data(), tokens.size() * 2);
  out.commit();
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
