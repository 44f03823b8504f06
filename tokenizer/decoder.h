// The decoder of a tokenizer.json: how the tokens of some ids become text, a chain of steps over
// the list of token strings as HF tokenizers runs it. Supported: ByteLevel (GPT-2's alphabet back
// to bytes) and SentencePiece's steps: Replace of a literal string, ByteFallback (<0xXX> tokens
// back to bytes), Fuse, Strip (Llama 2's converted files chain these four) and Metaspace (newer
// converted files), alone or in a Sequence. read_tokenizer_json.cpp reads them.
#pragma once

#include <string>
#include <vector>

#include "tokenizer/pre_tokenizer.h"

namespace dsx::tokenizer {

struct DecodeStep {
  enum class Kind { ByteLevel, Replace, ByteFallback, Fuse, Strip, Metaspace } kind;
  std::string text;          // Replace's pattern, Strip's character, Metaspace's replacement
  std::string to;            // Replace's content
  size_t start = 0, stop = 0;  // Strip: at most this many `text` characters off each end
  MetaspacePrepend prepend = MetaspacePrepend::Always;
};

class Decoder {
 public:
  void add(DecodeStep step) { steps_.push_back(std::move(step)); }
  bool empty() const { return steps_.empty(); }
  // The tokens through every step, joined.
  std::string decode(std::vector<std::string> tokens) const;

 private:
  std::vector<DecodeStep> steps_;
};

}  // namespace dsx::tokenizer
