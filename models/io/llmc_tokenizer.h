// Decoding with llm.c's GPT-2 tokenizer file (gpt2_tokenizer.bin: 256 int32 header, magic
// 20240328, version 1 or 2, vocabulary size, end-of-text token in version 2; then per token a
// length byte and that many bytes). dsx has no BPE encoder: GPT-2-vocabulary prompts are given
// as token ids; byte-level models need no tokenizer at all.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace dsx::models {

class LlmcTokenizer {
 public:
  explicit LlmcTokenizer(const std::string& path);  // Error(Format) on a bad file
  std::string decode(int32_t token) const;          // "" for an id outside the table
  int32_t eot_token() const { return eot_; }

 private:
  std::vector<std::string> pieces_;
  int32_t eot_ = 50256;
};

}  // namespace dsx::models
