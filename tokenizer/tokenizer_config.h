// tokenizer_config.json, the transformers side of a tokenizer: which tokens are BOS and EOS and
// whether encoding adds them (add_bos_token, add_eos_token), the class and switches that decide
// how transformers reads a tokenizer.model, and its chat_template (chat_template.h renders it).
// Other fields (model_max_length, ...) are not read here.
#pragma once

#include <optional>
#include <string>

namespace dsx::tokenizer {

struct TokenizerConfig {
  std::string source;  // the file, or "" when the folder has none
  std::optional<std::string> bos_token;
  std::optional<std::string> eos_token;
  std::optional<std::string> unk_token;
  std::optional<std::string> pad_token;
  std::optional<bool> add_bos_token;
  std::optional<bool> add_eos_token;
  // transformers' class for the folder ("LlamaTokenizer", ...), and two of its switches for
  // SentencePiece models (llama_tokenizer_from_model.h).
  std::optional<std::string> tokenizer_class;
  std::optional<bool> legacy;
  std::optional<bool> add_prefix_space;
  // A string, or of a list of named templates ([{"name": ..., "template": ...}]) the one named
  // "default"; nullopt when there is none.
  std::optional<std::string> chat_template;
};

// A missing file is an empty config; a malformed one a dsx::Error naming the field.
TokenizerConfig read_tokenizer_config(const std::string& path);

}  // namespace dsx::tokenizer
