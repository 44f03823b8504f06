// The interface every tokenizer of dsx answers to: text in, token ids out, and back. Behind it sit
// Hugging Face tokenizer.json byte-level BPE (hf_bpe_tokenizer.h) and SentencePiece models
// (sentencepiece_tokenizer.h); load_tokenizer.h picks one from what a model folder holds.
// Encoding and decoding are const and may run on many threads at once.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace dsx::tokenizer {

using TokenId = int32_t;

struct EncodeOptions {
  // Add what the tokenizer adds around a text (BOS, EOS) as tokenizer_config.json or the
  // post-processor of tokenizer.json says. Hugging Face's `add_special_tokens`.
  bool add_special_tokens = true;
  // Treat special tokens written in the text ("<|endoftext|>") as plain text, not as their id.
  // Hugging Face's `encode_special_tokens`; for training data nobody should inject control ids.
  bool split_special_tokens = false;
};

// What encode adds around a text with add_special_tokens (BOS before, EOS after, as the
// tokenizer's rules say).
struct SpecialTokenTemplate {
  std::vector<TokenId> prefix;
  std::vector<TokenId> suffix;
};

struct DecodeOptions {
  bool skip_special_tokens = false;
};

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // Appends the ids of `text` (UTF-8) to `out`; invalid UTF-8 is a dsx::Error naming the offset.
  virtual void encode_into(std::string_view text, const EncodeOptions& options,
                           std::vector<TokenId>& out) const = 0;
  // The bytes the ids stand for (may end inside a UTF-8 character when the ids are cut short).
  virtual std::string decode(std::span<const TokenId> ids, const DecodeOptions& options) const = 0;

  virtual std::optional<TokenId> bos_id() const = 0;
  virtual std::optional<TokenId> eos_id() const = 0;
  // One past the largest id this tokenizer can produce (the embedding's row count at least).
  virtual TokenId vocab_size() const = 0;
  virtual std::optional<TokenId> token_to_id(std::string_view token) const = 0;
  virtual SpecialTokenTemplate special_template() const = 0;
  // Whether a cut right after a '\n' that follows a printable ASCII character and precedes an
  // ASCII letter never changes the ids (every pre-token ends there): parallel_encode.h cuts
  // large texts there. False unless the tokenizer knows it.
  virtual bool cuts_at_line_starts() const { return false; }
  // What was loaded, for logs: "byte-level BPE from DIR/tokenizer.json (vocab 128256)".
  virtual std::string describe() const = 0;

  std::vector<TokenId> encode(std::string_view text, const EncodeOptions& options = {}) const {
    std::vector<TokenId> ids;
    encode_into(text, options, ids);
    return ids;
  }
  std::string decode(std::span<const TokenId> ids) const { return decode(ids, DecodeOptions{}); }
};

}  // namespace dsx::tokenizer
