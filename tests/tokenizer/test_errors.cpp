// Bad inputs are dsx::Errors that name the file, what is wrong and what to do; never a crash
// and never ids that differ from Hugging Face's.
#include <gtest/gtest.h>

#include <filesystem>
#include <random>

#include "dsx/error.h"
#include "tokenizer/hf_bpe_tokenizer.h"
#include "tokenizer/load_tokenizer.h"
#include "tokenizer/read_tokenizer_json.h"
#include "tokenizer_test_util.h"

namespace dsx::tokenizer {
namespace {

using testing_util::fixture;
using testing_util::TempDir;

// The message of the dsx::Error that loading `path` throws, with its kind checked.
std::string load_error(const std::string& path, ErrorKind kind) {
  try {
    load_tokenizer(path);
  } catch (const Error& e) {
    EXPECT_EQ(to_string(e.kind()), std::string(to_string(kind))) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "loading " << path << " did not fail";
  return "";
}

// The gpt2 fixture's tokenizer.json with `from` replaced by `to` (once), in a scratch folder.
class EditedGpt2 {
 public:
  EditedGpt2(const std::string& from, const std::string& to) {
    std::string json = testing_util::read(fixture("gpt2") + "/tokenizer.json");
    size_t pos = json.find(from);
    EXPECT_NE(pos, std::string::npos) << from;
    if (pos != std::string::npos) json.replace(pos, from.size(), to);
    dir_.write("tokenizer.json", json);
  }
  std::string path() const { return dir_.path(); }

 private:
  TempDir dir_;
};

#define EXPECT_HAS(message, part) \
  EXPECT_NE((message).find(part), std::string::npos) << "message: " << (message)

TEST(TokenizerErrors, MissingFolder) {
  auto m = load_error("/nonexistent/model", ErrorKind::Io);
  EXPECT_HAS(m, "/nonexistent/model: no such file or folder");
}

TEST(TokenizerErrors, FolderWithoutTokenizerNamesWhatItHolds) {
  TempDir dir;
  dir.write("config.json", "{}");
  auto m = load_error(dir.path(), ErrorKind::Io);
  EXPECT_HAS(m, "holds neither tokenizer.json nor tokenizer.model");
  EXPECT_HAS(m, "config.json");
}

TEST(TokenizerErrors, TruncatedJsonGivesLineAndColumn) {
  TempDir dir;
  std::string json = testing_util::read(fixture("gpt2") + "/tokenizer.json");
  dir.write("tokenizer.json", json.substr(0, json.size() / 2));
  auto m = load_error(dir.path(), ErrorKind::Format);
  EXPECT_HAS(m, dir.file("tokenizer.json") + ":");
  EXPECT_HAS(m, "invalid JSON");
  EXPECT_HAS(m, "Check that it is complete");
}

// One edit of the gpt2 fixture each, and what the error must say of it.
struct Gpt2Edit {
  const char* from;
  const char* to;
  ErrorKind kind;
  const char* message;
};

TEST(TokenizerErrors, EachBadFieldIsNamedWithItsPath) {
  const Gpt2Edit edits[] = {
      {"\"vocab\": {", "\"vocab\": 7, \"x\": {", ErrorKind::Format,
       "model.vocab must be an object, found a number"},
      {"\"id\": 0,", "\"id\": \"zero\",", ErrorKind::Format,
       "added_tokens[0].id must be an integer, found a string"},
      {"\"type\": \"BPE\"", "\"type\": \"Unigram\"", ErrorKind::Unsupported,
       "tokenizer.json: model.type is \"Unigram\""},
      {"\"decoder\": {\n    \"type\": \"ByteLevel\"", "\"decoder\": {\n    \"type\": \"WordPiece\"",
       ErrorKind::Unsupported, "decoder.type is the decoder \"WordPiece\""},
      {"\"normalizer\": null",
       "\"normalizer\": {\"type\": \"Replace\", \"pattern\": {\"Regex\": \" +\"}, \"content\": \" "
       "\"}",
       ErrorKind::Unsupported, "normalizer.pattern is a Regex"},
      {"\"normalizer\": null", "\"normalizer\": {\"type\": \"Lowercase\"}", ErrorKind::Unsupported,
       "normalizer.type is the normalizer \"Lowercase\""},
      {"\"type\": \"ByteLevel\",\n    \"add_prefix_space\": false,\n    \"trim_offsets\": true,\n  "
       " "
       " \"use_regex\": true",
       "\"type\": \"Whitespace\"", ErrorKind::Unsupported,
       "pre_tokenizer.type is the pre-tokenizer \"Whitespace\""},
      {"\"truncation\": null", "\"truncation\": {\"max_length\": 512}", ErrorKind::Unsupported,
       "truncation is set"},
      {"\"merges\": [", "\"merges\": [[\"zz\", \"qq\"], ", ErrorKind::Format,
       "model.merges[0] (\"zz\", \"qq\") uses the token \"zz\""},
  };
  for (const Gpt2Edit& e : edits) {
    SCOPED_TRACE(e.to);
    EditedGpt2 edited(e.from, e.to);
    EXPECT_HAS(load_error(edited.path(), e.kind), e.message);
  }
}

// The SentencePiece-style fixture with one edit: bad Metaspace and Strip values are named.
TEST(TokenizerErrors, BadMetaspaceAndStripValuesAreNamed) {
  const std::string json = testing_util::read(fixture("spm_json") + "/tokenizer.json");
  const auto edited = [&](const std::string& from, const std::string& to) {
    std::string text = json;
    const size_t pos = text.find(from);
    EXPECT_NE(pos, std::string::npos) << from;
    if (pos != std::string::npos) text.replace(pos, from.size(), to);
    return text;
  };
  TempDir dir;
  dir.write("tokenizer.json", edited("\"prepend_scheme\": \"first\"", "\"prepend_scheme\": \"sometimes\""));
  EXPECT_HAS(load_error(dir.path(), ErrorKind::Format), "pre_tokenizer.prepend_scheme is \"sometimes\"");
  dir.write("tokenizer.json", edited("\"replacement\": \"\u2581\"", "\"replacement\": \"ab\""));
  EXPECT_HAS(load_error(dir.path(), ErrorKind::Format), "pre_tokenizer.replacement must be one character");
  dir.write("tokenizer.json", edited("\"start\": 1", "\"start\": -1"));
  EXPECT_HAS(load_error(dir.path(), ErrorKind::Format), "start must not be negative");
}

TEST(TokenizerErrors, BadRegexNamesThePattern) {
  TempDir dir;
  std::string json = testing_util::read(fixture("llama3") + "/tokenizer.json");
  json.replace(json.find("\"Regex\": \""), 10, "\"Regex\": \"(?<");
  dir.write("tokenizer.json", json);
  auto m = load_error(dir.path(), ErrorKind::Format);
  EXPECT_HAS(m, "pre_tokenizer.pretokenizers[0].pattern");
  EXPECT_HAS(m, "does not compile with PCRE2");
}

TEST(TokenizerErrors, ConfigTokenMissingFromTheVocabulary) {
  TempDir dir;
  std::filesystem::copy_file(fixture("gpt2") + "/tokenizer.json", dir.file("tokenizer.json"));
  dir.write("tokenizer_config.json", R"({"bos_token": "<s>"})");
  auto m = load_error(dir.path(), ErrorKind::Format);
  EXPECT_HAS(m, "tokenizer_config.json: bos_token is \"<s>\"");
}

TEST(TokenizerErrors, ConfigWithAWrongType) {
  TempDir dir;
  std::filesystem::copy_file(fixture("gpt2") + "/tokenizer.json", dir.file("tokenizer.json"));
  dir.write("tokenizer_config.json", R"({"add_bos_token": "yes"})");
  auto m = load_error(dir.path(), ErrorKind::Format);
  EXPECT_HAS(m, "add_bos_token must be a boolean, found a string");
}

TEST(TokenizerErrors, CorruptSentencePieceModel) {
  TempDir dir;
  dir.write("tokenizer.model", "this is not a protobuf");
  auto m = load_error(dir.path(), ErrorKind::Format);
  EXPECT_HAS(m, "tokenizer.model: not a SentencePiece model");
}

TEST(TokenizerErrors, InvalidUtf8TextNamesTheByte) {
  auto tok = load_tokenizer(fixture("gpt2"));
  try {
    tok->encode(std::string("ok \xC3\x28 bad"));
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Format);
    EXPECT_HAS(std::string(e.what()), "byte 3");
  }
}

}  // namespace
}  // namespace dsx::tokenizer

namespace dsx::tokenizer {
namespace {

// 400 copies of the llama3 fixture, each with one random edit (a byte changed, deleted or
// duplicated, or a cut): each loads and encodes, or is a dsx::Error. Never a crash, never
// another exception.
TEST(TokenizerErrors, RandomlyDamagedFilesNeverCrash) {
  const std::string json = testing_util::read(fixture("llama3") + "/tokenizer.json");
  std::mt19937 rng(2026);
  int loaded = 0, refused = 0;
  for (int trial = 0; trial < 400; ++trial) {
    std::string damaged = json;
    size_t pos = rng() % damaged.size();
    switch (rng() % 4) {
      case 0:
        damaged[pos] = static_cast<char>("{}[]\",:0a-\\ \x80"[rng() % 13]);
        break;
      case 1:
        damaged.erase(pos, 1 + rng() % 8);
        break;
      case 2:
        damaged.insert(pos, damaged.substr(pos, 1 + rng() % 8));
        break;
      case 3:
        damaged.resize(pos);
        break;
    }
    try {
      HfBpeTokenizer tok(parse_tokenizer_json(damaged, "damaged.json"));
      tok.encode("Hello wörld 123 <|eot_id|>\n");
      ++loaded;
    } catch (const Error&) {
      ++refused;
    }
  }
  EXPECT_EQ(loaded + refused, 400);
  EXPECT_GT(refused, 100);  // most damage is seen
  EXPECT_GT(loaded, 10);    // and damage inside a string is just another token
}

}  // namespace
}  // namespace dsx::tokenizer
