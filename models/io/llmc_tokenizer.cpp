// llm.c tokenizer file, decode only (see llmc_tokenizer.h).
#include "models/io/llmc_tokenizer.h"

#include <cstring>

#include "dsx/error.h"
#include "models/io/files.h"

namespace dsx::models {

LlmcTokenizer::LlmcTokenizer(const std::string& path) {
  MappedFile f(path);
  auto bad = [&](const std::string& what) {
    return Error(ErrorKind::Format, "tokenizer '" + path + "': " + what + "; expected llm.c's gpt2_tokenizer.bin");
  };
  if (f.size() < 1024) throw bad("shorter than the 1024-byte header");
  int32_t h[4];
  std::memcpy(h, f.data(), sizeof(h));
  if (h[0] != 20240328) throw bad("magic " + std::to_string(h[0]));
  if (h[1] != 1 && h[1] != 2) throw bad("version " + std::to_string(h[1]));
  if (h[2] < 1) throw bad("vocabulary size " + std::to_string(h[2]));
  if (h[1] == 2) eot_ = h[3];
  size_t at = 1024;
  for (int32_t i = 0; i < h[2]; ++i) {
    if (at >= f.size()) throw bad("ends at token " + std::to_string(i) + " (truncated)");
    size_t len = f.data()[at++];
    if (len == 0 || at + len > f.size()) throw bad("token " + std::to_string(i) + " has a bad length");
    pieces_.emplace_back(reinterpret_cast<const char*>(f.data() + at), len);
    at += len;
  }
}

std::string LlmcTokenizer::decode(int32_t token) const {
  return token >= 0 && static_cast<size_t>(token) < pieces_.size() ? pieces_[token] : std::string();
}

}  // namespace dsx::models
