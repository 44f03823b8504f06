// Each step maps the list of token strings to a new list, as HF's Decoder::decode_chain; the
// result is the last list joined.
#include "tokenizer/decoder.h"

#include <cctype>
#include <cstdlib>

#include "dsx/replace_all.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/utf8.h"

namespace dsx::tokenizer {
namespace {

using Tokens = std::vector<std::string>;

// "<0x41>" -> 0x41; -1 for any other token.
int fallback_byte(const std::string& token) {
  if (token.size() != 6 || !token.starts_with("<0x") || token.back() != '>') return -1;
  const auto hex = [](char c) { return std::isxdigit(static_cast<unsigned char>(c)) != 0; };
  if (!hex(token[3]) || !hex(token[4])) return -1;
  return int(std::strtol(token.substr(3, 2).c_str(), nullptr, 16));
}

// Runs of byte tokens become their text, or one U+FFFD per byte where the run is not UTF-8.
Tokens byte_fallback(Tokens tokens) {
  Tokens out;
  std::string run;  // one byte per token
  auto flush = [&] {
    if (run.empty()) return;
    if (!utf8::first_invalid_byte(run)) {
      out.push_back(run);
    } else {
      out.insert(out.end(), run.size(), "\xEF\xBF\xBD");
    }
    run.clear();
  };
  for (std::string& token : tokens) {
    if (const int byte = fallback_byte(token); byte >= 0) {
      run.push_back(static_cast<char>(byte));
      continue;
    }
    flush();
    out.push_back(std::move(token));
  }
  flush();
  return out;
}

// Up to `start` copies of `c` off the front and `stop` off the back of each token.
void strip(Tokens& tokens, const std::string& c, size_t start, size_t stop) {
  if (c.empty()) return;
  for (std::string& token : tokens) {
    size_t front = 0, back = token.size();
    for (size_t n = 0; n < start && std::string_view(token).substr(front).starts_with(c); ++n) front += c.size();
    for (size_t n = 0; n < stop && back - front >= c.size() && token.compare(back - c.size(), c.size(), c) == 0; ++n)
      back -= c.size();
    token = token.substr(front, back - front);
  }
}

// The replacement back to spaces; in the first token it goes without a space, unless the encoder
// never prepends one.
void metaspace(Tokens& tokens, const DecodeStep& step) {
  for (size_t i = 0; i < tokens.size(); ++i) {
    const bool first = i == 0 && step.prepend != MetaspacePrepend::Never;
    tokens[i] = replace_all(tokens[i], step.text, first ? "" : " ");
  }
}

}  // namespace

std::string Decoder::decode(Tokens tokens) const {
  for (const DecodeStep& step : steps_) {
    switch (step.kind) {
      case DecodeStep::Kind::ByteLevel: {
        std::string bytes;
        for (const std::string& token : tokens) byte_level::append_bytes_of(token, bytes);
        tokens.assign(1, std::move(bytes));
        break;
      }
      case DecodeStep::Kind::Replace:
        for (std::string& token : tokens) token = replace_all(token, step.text, step.to);
        break;
      case DecodeStep::Kind::ByteFallback:
        tokens = byte_fallback(std::move(tokens));
        break;
      case DecodeStep::Kind::Fuse: {
        std::string all;
        for (const std::string& token : tokens) all += token;
        tokens.assign(1, std::move(all));
        break;
      }
      case DecodeStep::Kind::Strip:
        strip(tokens, step.text, step.start, step.stop);
        break;
      case DecodeStep::Kind::Metaspace:
        metaspace(tokens, step);
        break;
    }
  }
  std::string out;
  for (const std::string& token : tokens) out += token;
  return out;
}

}  // namespace dsx::tokenizer
