// The normalizer of a tokenizer.json. Supported: none, and the Unicode normal forms NFC, NFD,
// NFKC and NFKD (Qwen2 uses NFC), alone or in a Sequence, computed by utf8proc. Anything else
// is refused by read_tokenizer_json.cpp before a text is encoded.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace dsx::tokenizer {

enum class UnicodeForm { NFC, NFD, NFKC, NFKD };

class Normalizer {
 public:
  void add(UnicodeForm form) { forms_.push_back(form); }
  bool empty() const { return forms_.empty(); }

  // `text` normalized, in `out`; returns a view of `text` itself when nothing changes (no forms,
  // or ASCII text, which every form leaves as it is).
  std::string_view apply(std::string_view text, std::string& out) const;

 private:
  std::vector<UnicodeForm> forms_;
};

}  // namespace dsx::tokenizer
