// The pre-tokenizer of a tokenizer.json: cuts normalized text into the pieces BPE runs on.
// Supported, as Hugging Face defines them: Split (a Regex or String pattern, any of the five
// behaviours, invert), ByteLevel (add_prefix_space, use_regex = GPT-2's pattern), Metaspace
// (SentencePiece's spaces as "▁": Llama 2's and Mistral's converted tokenizer.json) and a Sequence
// of those with ByteLevel last. Reading the JSON is read_tokenizer_json.cpp's job; this file only
// runs the steps.
#pragma once

#include <deque>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/regex_splitter.h"

namespace dsx::tokenizer {

// What becomes of a match and the text between matches (HF SplitDelimiterBehavior).
enum class SplitBehavior { Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous };

// GPT-2's pattern, the one ByteLevel uses when use_regex is true.
inline constexpr const char* kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

// Llama 3's and Qwen2's Split patterns as Hugging Face's converters write them (Qwen2 takes
// single digits).
inline constexpr const char* kLlama3Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
inline constexpr const char* kQwen2Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// When Metaspace puts its replacement before a piece that does not start with it: always, only
// before the piece that starts the text (not after an added token), or never.
enum class MetaspacePrepend { Always, First, Never };

struct PreTokenizeStep {
  enum class Kind { Split, PrefixSpace, Metaspace } kind;
  std::shared_ptr<const RegexSplitter> regex;  // Split; Metaspace's split on its replacement
  SplitBehavior behavior = SplitBehavior::Isolated;
  bool invert = false;
  std::string replacement = {};  // Metaspace: what each space becomes
  MetaspacePrepend prepend = MetaspacePrepend::Always;
};

// Buffers reused from one call to the next on a thread.
struct PreTokenizeScratch {
  std::vector<std::string_view> pieces;
  std::vector<std::string_view> next;
  std::vector<TextSpan> matches;
  std::deque<std::string> owned;  // pieces with a prefix space added; a deque keeps them in place
};

class PreTokenizer {
 public:
  void add_step(PreTokenizeStep step) { steps_.push_back(std::move(step)); }
  void set_byte_level(bool on) { byte_level_ = on; }
  // The pieces are in the model's byte-level alphabet only after byte_level::to_alphabet.
  bool byte_level() const { return byte_level_; }
  bool has_steps() const { return !steps_.empty(); }
  // True when the steps are Isolated splits by GPT-2's, Llama 3's or Qwen2's pattern only: each
  // of them ends a piece at a '\n' between a non-space ASCII character and an ASCII letter, and
  // starts the next piece at the letter (what parallel encoding needs).
  bool splits_only_by_known_patterns() const;

  // Cuts `text` into non-empty pieces in scratch.pieces (views into `text` or scratch.owned).
  // `starts_the_input`: `text` is the beginning of what was encoded (Metaspace's First).
  void split(std::string_view text, PreTokenizeScratch& scratch, bool starts_the_input = true) const;

 private:
  void apply_metaspace(const PreTokenizeStep& step, std::string_view piece, bool first,
                       PreTokenizeScratch& scratch) const;
  void apply_split(const PreTokenizeStep& step, std::string_view piece,
                   PreTokenizeScratch& scratch) const;

  std::vector<PreTokenizeStep> steps_;
  bool byte_level_ = false;
};

}  // namespace dsx::tokenizer
