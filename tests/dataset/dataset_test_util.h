// Shared pieces of the dataset tests: the fixture tokenizers of tests/tokenizer/data, a seeded
// corpus of words (with blank lines), the ids a document should get by the tokenizer's own
// encode, and small file helpers.
#pragma once

#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "tokenizer/load_tokenizer.h"

namespace dsx::test {

inline std::string fixture_tokenizer(const std::string& name) {
  return std::string(DSX_SOURCE_DIR) + "/tests/tokenizer/data/" + name;
}

inline std::unique_ptr<tokenizer::Tokenizer> load_fixture(const std::string& name) {
  return tokenizer::load_tokenizer(fixture_tokenizer(name));
}

// `lines` lines of seeded words, every seventh one blank, each ending in '\n'.
inline std::vector<std::string> corpus_lines(size_t lines, uint64_t seed) {
  static const char* words[] = {"the", "quick", "brown", "fox",    "jumps", "over",  "lazy",
                                "dog", "Hello", "world", "tokens", "data",  "shard", "rank",
                                "é",   "naïve", "123",   "x+y",    "model", "train"};
  std::mt19937_64 rng(seed);
  std::vector<std::string> out;
  for (size_t i = 0; i < lines; ++i) {
    std::string line;
    if (i % 7 != 6) {
      const size_t n = 1 + rng() % 20;
      for (size_t w = 0; w < n; ++w) line += (w ? " " : "") + std::string(words[rng() % 20]);
    }
    out.push_back(line + "\n");
  }
  return out;
}

inline std::string joined(const std::vector<std::string>& parts) {
  std::string s;
  for (const auto& p : parts) s += p;
  return s;
}

inline void write_file(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

inline bool blank(const std::string& s) {
  return s.find_first_not_of(" \t\r\n") == std::string::npos;
}

// What a training document should become, by the tokenizer's plain encode: its ids with the
// tokenizer's own special tokens, then EOS.
inline std::vector<int32_t> document_ids(const tokenizer::Tokenizer& tok, const std::string& text) {
  auto ids = tok.encode(text);
  ids.push_back(*tok.eos_id());
  return ids;
}

inline std::vector<int32_t> corpus_ids(const tokenizer::Tokenizer& tok,
                                       const std::vector<std::string>& lines) {
  std::vector<int32_t> all;
  for (const auto& l : lines) {
    if (blank(l)) continue;
    auto ids = document_ids(tok, l);
    all.insert(all.end(), ids.begin(), ids.end());
  }
  return all;
}

}  // namespace dsx::test
