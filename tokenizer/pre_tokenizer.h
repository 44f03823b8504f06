// The pre-tokenizer of a tokenizer.json: cuts normalized text into the pieces BPE runs on.
// Supported, as Hugging Face defines them: Split (a Regex or String pattern, any of the five
// behaviours, invert), ByteLevel (add_prefix_space, use_regex = GPT-2's pattern) and a Sequence
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

struct PreTokenizeStep {
  enum class Kind { Split, PrefixSpace } kind;
  std::shared_ptr<const RegexSplitter> regex;  // Split only
  SplitBehavior behavior = SplitBehavior::Isolated;
  bool invert = false;
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

  // Cuts `text` into non-empty pieces in scratch.pieces (views into `text` or scratch.owned).
  void split(std::string_view text, PreTokenizeScratch& scratch) const;

 private:
  void apply_split(const PreTokenizeStep& step, std::string_view piece,
                   PreTokenizeScratch& scratch) const;

  std::vector<PreTokenizeStep> steps_;
  bool byte_level_ = false;
};

}  // namespace dsx::tokenizer
