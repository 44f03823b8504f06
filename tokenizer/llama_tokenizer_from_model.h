// What transformers 5's LlamaTokenizer (tokenizer_class "LlamaTokenizer", the class of Llama 2's
// and Mistral's folders) makes of a SentencePiece BPE tokenizer.model: not sentencepiece, but a
// tokenizers BPE with byte fallback, merges derived from the vocabulary, a Metaspace pre-tokenizer
// and the control pieces as added tokens. Its ids differ from sentencepiece's on leading spaces
// and on special-token strings in the text; this gives transformers' ids.
#pragma once

#include <optional>
#include <string>

#include "tokenizer/hf_bpe_tokenizer.h"
#include "tokenizer/sentencepiece_model_file.h"

namespace dsx::tokenizer {

// tokenizer_config.json's switches, with LlamaTokenizer's defaults when unset.
struct LlamaTokenizerSwitches {
  std::optional<bool> legacy;            // default false
  std::optional<bool> add_prefix_space;  // default true
};

// The tokenizer transformers builds; BOS, EOS and the special template are left to the loader.
// `source` names the model file in messages.
HfBpeParts llama_tokenizer_from_model(const SentencePieceModelFile& model,
                                      const LlamaTokenizerSwitches& switches,
                                      const std::string& source);

}  // namespace dsx::tokenizer
