// PCRE2 details that matter for speed and correctness:
// - the text is checked for UTF-8 once by the caller, so each match runs with
//   PCRE2_NO_UTF_CHECK (otherwise every call would re-check the whole rest of the text);
// - match data and a JIT stack are per thread and reused; a run of whitespace against
//   `\s+(?!\S)` backtracks deeply, so the JIT stack may grow to 16 MB instead of 32 KB;
// - an empty match (none of the known patterns has one) advances by one character;
// - \p{..} classes get the characters Unicode assigned after PCRE2's tables, up to the Unicode
//   16.0 of HF tokenizers (regex_unicode_classes.h), in a second compiled pattern used only for
//   text that holds such characters (the ranges slow every other character down).
#define PCRE2_CODE_UNIT_WIDTH 8
#include "tokenizer/regex_splitter.h"

#include <pcre2.h>

#include "dsx/error.h"
#include "tokenizer/regex_unicode_classes.h"
#include "tokenizer/utf8.h"

namespace dsx::tokenizer {

struct RegexSplitter::Compiled {
  pcre2_code* as_written = nullptr;
  pcre2_code* extended = nullptr;  // with the Unicode 16.0 additions; null when they change nothing
  ~Compiled() {
    pcre2_code_free(extended);
    pcre2_code_free(as_written);
  }
};

namespace {

std::string pcre2_message(int code) {
  PCRE2_UCHAR buffer[256];
  pcre2_get_error_message(code, buffer, sizeof(buffer));
  return reinterpret_cast<const char*>(buffer);
}

// Per-thread scratch shared by every pattern: only the whole match (pair 0) is read.
struct MatchScratch {
  pcre2_match_data* data = pcre2_match_data_create(1, nullptr);
  pcre2_jit_stack* jit_stack = pcre2_jit_stack_create(32 * 1024, 16 * 1024 * 1024, nullptr);
  pcre2_match_context* context = pcre2_match_context_create(nullptr);
  MatchScratch() { pcre2_jit_stack_assign(context, nullptr, jit_stack); }
  ~MatchScratch() {
    pcre2_match_context_free(context);
    pcre2_jit_stack_free(jit_stack);
    pcre2_match_data_free(data);
  }
};

MatchScratch& scratch() {
  thread_local MatchScratch s;
  return s;
}

}  // namespace

RegexSplitter::RegexSplitter(const std::string& pattern, bool literal, const std::string& where)
    : compiled_(std::make_unique<Compiled>()), pattern_(pattern), where_(where) {
  // PCRE2_LITERAL refuses PCRE2_UCP (nothing in a literal depends on character classes).
  uint32_t options = PCRE2_UTF | (literal ? PCRE2_LITERAL : PCRE2_UCP);
  int error = 0;
  PCRE2_SIZE error_offset = 0;
  compiled_->as_written = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()),
                                        pattern.size(), options, &error, &error_offset, nullptr);
  if (!compiled_->as_written) {
    throw Error(ErrorKind::Format, where + ": the pattern " + pattern +
                                       " does not compile with PCRE2: " + pcre2_message(error) +
                                       " at offset " + std::to_string(error_offset));
  }
  const std::string extended = literal ? pattern : with_unicode_16_categories(pattern);
  if (extended != pattern) {
    compiled_->extended = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(extended.data()),
                                        extended.size(), options, &error, &error_offset, nullptr);
    if (!compiled_->extended) {
      throw Error(
          ErrorKind::Internal,
          where + ": the pattern " + pattern +
              " compiles, but not with the Unicode 16.0 classes added: " + pcre2_message(error));
    }
    pcre2_jit_compile(compiled_->extended, PCRE2_JIT_COMPLETE);
  }
  // JIT is an optimisation: without it (a PCRE2 built without JIT) matching is slower, not wrong.
  pcre2_jit_compile(compiled_->as_written, PCRE2_JIT_COMPLETE);
}

RegexSplitter::~RegexSplitter() = default;

void RegexSplitter::find_all(std::string_view text, std::vector<TextSpan>& out) const {
  MatchScratch& s = scratch();
  // The extended classes cost a range check per character: only for text that needs them.
  pcre2_code* code = compiled_->extended && may_hold_added_characters(text) ? compiled_->extended
                                                                            : compiled_->as_written;
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t pos = 0;
  while (pos < text.size()) {
    int rc = pcre2_match(code, subject, text.size(), pos, PCRE2_NO_UTF_CHECK, s.data, s.context);
    if (rc == PCRE2_ERROR_NOMATCH) return;
    if (rc < 0) {
      throw Error(ErrorKind::Format, where_ + ": matching the pattern " + pattern_ +
                                         " failed at byte " + std::to_string(pos) + ": " +
                                         pcre2_message(rc));
    }
    const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(s.data);
    size_t begin = ovector[0];
    size_t end = ovector[1];
    if (end > begin) {
      out.push_back({begin, end});
      pos = end;
    } else {
      pos = begin + utf8::decode_at(text, begin).length;
    }
  }
}

}  // namespace dsx::tokenizer
