// The normalizer of a tokenizer.json. Supported: none, the Unicode normal forms NFC, NFD, NFKC
// and NFKD (Qwen2 uses NFC) computed by utf8proc, and Prepend and Replace of a literal string
// (Llama 2's converted tokenizer.json: Prepend "▁", Replace " " by "▁"), alone or in a Sequence.
// Anything else is refused by read_tokenizer_json.cpp before a text is encoded.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace dsx::tokenizer {

enum class UnicodeForm { NFC, NFD, NFKC, NFKD };

class Normalizer {
 public:
  void add(UnicodeForm form) { steps_.push_back({Step::Kind::Form, form, {}, {}}); }
  // HF's Prepend: `prefix` before a text that is not empty.
  void add_prepend(std::string prefix) {
    steps_.push_back({Step::Kind::Prepend, {}, std::move(prefix), {}});
    forms_only_ = false;
  }
  // HF's Replace with a String pattern: every `from` (not empty) by `to`, left to right.
  void add_replace(std::string from, std::string to) {
    steps_.push_back({Step::Kind::Replace, {}, std::move(from), std::move(to)});
    forms_only_ = false;
  }
  bool empty() const { return steps_.empty(); }

  // `text` normalized, in `out`; returns a view of `text` itself when nothing changes (no steps,
  // or only normal forms and ASCII text, which every form leaves as it is).
  std::string_view apply(std::string_view text, std::string& out) const;

 private:
  struct Step {
    enum class Kind { Form, Prepend, Replace } kind;
    UnicodeForm form;
    std::string text;  // Prepend's prefix, Replace's pattern
    std::string to;    // Replace's content
  };
  void apply_form(UnicodeForm form, std::string& out) const;

  std::vector<Step> steps_;
  bool forms_only_ = true;  // no Prepend or Replace: ASCII text passes unchanged
};

}  // namespace dsx::tokenizer
