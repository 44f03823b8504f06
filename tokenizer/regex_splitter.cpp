// PCRE2 details that matter for speed and correctness:
// - the text is checked for UTF-8 once by the caller, so each match runs with
//   PCRE2_NO_UTF_CHECK (otherwise every call would re-check the whole rest of the text);
// - match data and a JIT stack are per thread and reused; a run of whitespace against
//   `\s+(?!\S)` backtracks deeply, so the JIT stack may grow to 16 MB instead of 32 KB;
// - an empty match (none of the known patterns has one) advances by one character.
#define PCRE2_CODE_UNIT_WIDTH 8
#include "tokenizer/regex_splitter.h"

#include <pcre2.h>

#include "dsx/error.h"
#include "tokenizer/utf8.h"

namespace dsx::tokenizer {

struct RegexSplitter::Compiled {
  pcre2_code* code = nullptr;
  ~Compiled() { pcre2_code_free(code); }
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
  compiled_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                  options, &error, &error_offset, nullptr);
  if (!compiled_->code) {
    throw Error(ErrorKind::Format, where + ": the pattern " + pattern +
                                       " does not compile with PCRE2: " + pcre2_message(error) +
                                       " at offset " + std::to_string(error_offset));
  }
  // JIT is an optimisation: without it (a PCRE2 built without JIT) matching is slower, not wrong.
  pcre2_jit_compile(compiled_->code, PCRE2_JIT_COMPLETE);
}

RegexSplitter::~RegexSplitter() = default;

void RegexSplitter::find_all(std::string_view text, std::vector<TextSpan>& out) const {
  MatchScratch& s = scratch();
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t pos = 0;
  while (pos < text.size()) {
    int rc = pcre2_match(compiled_->code, subject, text.size(), pos, PCRE2_NO_UTF_CHECK, s.data,
                         s.context);
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
