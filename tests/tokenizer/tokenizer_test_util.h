// Helpers of the tokenizer tests: the fixture folders, scratch folders, and a small
// tokenizer.json written from a vocabulary and merges, to test one rule at a time.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

namespace dsx::tokenizer::testing_util {

inline std::string fixture(const std::string& name) {
  return std::string(DSX_SOURCE_DIR) + "/tests/tokenizer/data/" + name;
}

// A folder under /tmp removed at the end of the test.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = "/tmp/dsx_tokenizer_test_XXXXXX";
    path_ = mkdtemp(tmpl.data());
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }
  void write(const std::string& name, const std::string& text) const {
    std::ofstream(file(name), std::ios::binary) << text;
  }

 private:
  std::string path_;
};

inline std::string read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

inline std::string quoted(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

// A tokenizer.json with a BPE model over `vocab` (ids in order) and `merges` (pair form), no
// pre-tokenizer unless one is given, and the ByteLevel decoder.
inline std::string small_tokenizer_json(
    const std::vector<std::string>& vocab,
    const std::vector<std::pair<std::string, std::string>>& merges,
    const std::string& model_extra = "", const std::string& pre_tokenizer = "null") {
  std::string v;
  for (size_t i = 0; i < vocab.size(); ++i) {
    v += (i ? "," : "") + quoted(vocab[i]) + ":" + std::to_string(i);
  }
  std::string m;
  for (size_t i = 0; i < merges.size(); ++i) {
    m += (i ? "," : "") + std::string("[") + quoted(merges[i].first) + "," +
         quoted(merges[i].second) + "]";
  }
  return R"({"version":"1.0","truncation":null,"padding":null,"added_tokens":[],"normalizer":null,)"
         R"("pre_tokenizer":)" +
         pre_tokenizer +
         R"(,"post_processor":null,"decoder":{"type":"ByteLevel"},)"
         R"("model":{"type":"BPE",)" +
         model_extra + R"("vocab":{)" + v + R"(},"merges":[)" + m + "]}}";
}

}  // namespace dsx::tokenizer::testing_util
