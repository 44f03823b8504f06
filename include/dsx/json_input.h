// The one bounded path for the JSON dsx reads: model config.json, checkpoint manifests and
// metadata, safetensors headers, tokenizer files, JSONL lines, traces (the ds_config reader,
// config/json.cpp, keeps positions in its own tree but uses the same DepthLimit and size cap).
// Unbounded, a 300 KB file of 150,000 '[' overflowed the stack of whatever parsed or walked it,
// and /dev/zero given as a file grew the process until the kernel killed it.
// Header-only (and RapidJSON's) so that every folder may use it without an upward dependency.
#pragma once

#include <rapidjson/document.h>
#include <rapidjson/error/en.h>
#include <rapidjson/reader.h>
#include <sys/stat.h>

#include <cstddef>
#include <cstdint>
#include <fstream>
#include <string>
#include <string_view>

#include "dsx/error.h"

namespace dsx {

// Deepest nesting any file dsx reads may have. The deepest real ones (tokenizer.json Sequences,
// chat messages with tool calls) need about 20; a ds_config needs about 5.
inline constexpr int kMaxJsonDepth = 64;
// Largest JSON file dsx reads whole. The biggest tokenizer.json files are about 35 MB and
// safetensors caps its header at 100 MB.
inline constexpr size_t kMaxJsonBytes = size_t{256} << 20;

// The whole of `path`, refused once it passes `max_bytes` (so an endless file costs no more
// memory than that). Error(Io) when it cannot be read, Error(Format) when it is too long.
inline std::string read_bounded_file(const std::string& path, size_t max_bytes = kMaxJsonBytes) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw Error(ErrorKind::Io, path + ": cannot open the file; check the path and its permissions");
  std::string text;
  static constexpr size_t kChunk = 1 << 16;
  while (in) {
    const size_t old = text.size();
    text.resize(old + kChunk);
    in.read(text.data() + old, kChunk);
    text.resize(old + static_cast<size_t>(in.gcount()));
    if (text.size() > max_bytes) {
      throw Error(
          ErrorKind::Format,
          path + ": longer than " + std::to_string(max_bytes >> 20) +
              " MiB, more than any file of this kind needs; check that it is the right file");
    }
  }
  if (in.bad()) {
    struct stat st {};
    if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
      throw Error(ErrorKind::Io, path + " is a directory, not a file; give the path of the file in it");
    throw Error(ErrorKind::Io, path + ": reading it failed; check the disk and the file");
  }
  return text;
}

// A RapidJSON SAX handler in front of another that refuses nesting deeper than `max_depth`, so
// neither the parser nor any later recursive walk of the tree can run out of stack.
template <class Handler>
class DepthLimit {
 public:
  DepthLimit(Handler& next, int max_depth) : next_(next), max_depth_(max_depth) {}
  bool too_deep() const { return too_deep_; }

  bool Null() { return next_.Null(); }
  bool Bool(bool b) { return next_.Bool(b); }
  bool Int(int i) { return next_.Int(i); }
  bool Uint(unsigned u) { return next_.Uint(u); }
  bool Int64(int64_t i) { return next_.Int64(i); }
  bool Uint64(uint64_t u) { return next_.Uint64(u); }
  bool Double(double d) { return next_.Double(d); }
  bool RawNumber(const char* s, rapidjson::SizeType n, bool copy) {
    return next_.RawNumber(s, n, copy);
  }
  bool String(const char* s, rapidjson::SizeType n, bool copy) { return next_.String(s, n, copy); }
  bool Key(const char* s, rapidjson::SizeType n, bool copy) { return next_.Key(s, n, copy); }
  bool StartObject() { return enter() && next_.StartObject(); }
  bool EndObject(rapidjson::SizeType members) { return --depth_, next_.EndObject(members); }
  bool StartArray() { return enter() && next_.StartArray(); }
  bool EndArray(rapidjson::SizeType items) { return --depth_, next_.EndArray(items); }

 private:
  bool enter() {
    if (depth_ >= max_depth_) return !(too_deep_ = true);
    return ++depth_, true;
  }
  Handler& next_;
  int max_depth_;
  int depth_ = 0;
  bool too_deep_ = false;
};

// "line:column" (columns in bytes from 1) of a byte offset, for messages; `text` starts on
// line `first_line` of its file.
inline std::string json_line_column(std::string_view text, size_t offset, uint64_t first_line = 1) {
  uint64_t line = first_line, column = 1;
  for (size_t i = 0; i < offset && i < text.size(); ++i)
    text[i] == '\n' ? (++line, column = 1) : ++column;
  return std::to_string(line) + ":" + std::to_string(column);
}

// `text` as a RapidJSON document: UTF-8 checked, at most kMaxJsonBytes and kMaxJsonDepth.
// `source` names it in messages (a path); `first_line` is the line of the file `text` starts on
// (a JSONL line's number). Throws Error(kind) "SOURCE:LINE:COLUMN: what is wrong; what to do".
// The document may be any JSON value: the caller checks the shape it expects.
inline rapidjson::Document parse_json(std::string_view text, const std::string& source,
                                      ErrorKind kind = ErrorKind::Format, uint64_t first_line = 1) {
  if (text.size() > kMaxJsonBytes) {
    throw Error(kind, source + ": " + std::to_string(text.size()) +
                          " bytes of JSON, more than the " + std::to_string(kMaxJsonBytes >> 20) +
                          " MiB dsx reads; check that it is the right file");
  }
  rapidjson::Document doc;
  rapidjson::ParseResult result;
  bool too_deep = false;
  auto generate = [&](rapidjson::Document& handler) {
    DepthLimit<rapidjson::Document> limited(handler, kMaxJsonDepth);
    rapidjson::MemoryStream bytes(text.data(), text.size());
    rapidjson::EncodedInputStream<rapidjson::UTF8<>, rapidjson::MemoryStream> stream(bytes);
    rapidjson::Reader reader;
    constexpr unsigned kFlags =
        rapidjson::kParseValidateEncodingFlag | rapidjson::kParseIterativeFlag;
    result = reader.Parse<kFlags>(stream, limited);
    too_deep = limited.too_deep();
    return !result.IsError();
  };
  doc.Populate(generate);
  if (too_deep) {
    throw Error(
        kind,
        source + ":" + json_line_column(text, result.Offset(), first_line) +
            ": JSON nested more than " + std::to_string(kMaxJsonDepth) +
            " levels deep, more than any file dsx reads needs; check that it is the right file");
  }
  if (result.IsError()) {
    throw Error(kind, source + ":" + json_line_column(text, result.Offset(), first_line) +
                          ": invalid JSON: " + rapidjson::GetParseError_En(result.Code()) +
                          " Check that it is complete and the right file.");
  }
  return doc;
}

}  // namespace dsx
