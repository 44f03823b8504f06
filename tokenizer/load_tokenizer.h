// The tokenizer of a Hugging Face model folder: tokenizer.json when it is there (byte-level
// BPE), else tokenizer.model (SentencePiece), with tokenizer_config.json's BOS / EOS rules.
// A path to one of those files also works. Errors name the folder, what is missing or wrong,
// and what to do.
#pragma once

#include <memory>
#include <string>

#include "tokenizer/tokenizer.h"

namespace dsx::tokenizer {

std::unique_ptr<Tokenizer> load_tokenizer(const std::string& path);

}  // namespace dsx::tokenizer
