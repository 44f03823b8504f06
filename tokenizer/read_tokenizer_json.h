// Reads a Hugging Face tokenizer.json into the parts of an HfBpeTokenizer. What dsx supports is
// read; anything else (a Unigram or WordPiece model, byte_fallback, an unknown normalizer,
// pre-tokenizer, post-processor or decoder, truncation or padding) is a dsx::Error
// (Unsupported) naming the component and the file: never ids that differ from Hugging Face's.
// BOS and EOS are left unset; the loader takes them from tokenizer_config.json.
#pragma once

#include <string>

#include "tokenizer/hf_bpe_tokenizer.h"

namespace dsx::tokenizer {

HfBpeParts read_tokenizer_json(const std::string& path);
// The same from the file's text (tests); `path` only names it in messages.
HfBpeParts parse_tokenizer_json(const std::string& text, const std::string& path);

}  // namespace dsx::tokenizer
