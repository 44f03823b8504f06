// Each fixture folder of data/ against the ids the Python libraries produced for the same texts
// (cases.json: the multilingual sample and short edge cases, with and without special tokens),
// and, where cases.json has it, the library's decoding of those ids.
#include <gtest/gtest.h>
#include <rapidjson/document.h>

#include <optional>
#include <string>
#include <vector>

#include "tokenizer/json_file.h"
#include "tokenizer/load_tokenizer.h"

namespace dsx::tokenizer {
namespace {

struct Case {
  std::string text;
  EncodeOptions options;
  std::vector<TokenId> ids;
  std::optional<std::string> decoded;  // the library's decode of ids, where cases.json has it
};

std::string fixture(const std::string& name) {
  return std::string(DSX_SOURCE_DIR) + "/tests/tokenizer/data/" + name;
}

std::vector<Case> read_cases(const std::string& name) {
  std::string path = fixture(name) + "/cases.json";
  rapidjson::Document doc = json::parse(json::read_file(path), path);
  std::vector<Case> cases;
  for (const auto& c : doc.GetArray()) {
    Case one;
    one.text.assign(c["text"].GetString(), c["text"].GetStringLength());
    one.options.add_special_tokens = c["add_special_tokens"].GetBool();
    one.options.split_special_tokens = c["split_special_tokens"].GetBool();
    for (const auto& id : c["ids"].GetArray()) one.ids.push_back(id.GetInt());
    if (c.HasMember("decoded")) one.decoded.emplace(c["decoded"].GetString(), c["decoded"].GetStringLength());
    cases.push_back(std::move(one));
  }
  return cases;
}

class FixtureIds : public testing::TestWithParam<std::string> {};

TEST_P(FixtureIds, EncodeGivesTheIdsOfThePythonLibrary) {
  auto tok = load_tokenizer(fixture(GetParam()));
  auto cases = read_cases(GetParam());
  ASSERT_GT(cases.size(), 20u);
  for (size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    EXPECT_EQ(tok->encode(c.text, c.options), c.ids)
        << GetParam() << " case " << i << " (add_special_tokens " << c.options.add_special_tokens
        << ", split_special_tokens " << c.options.split_special_tokens << "): \""
        << c.text.substr(0, 80) << "\"";
    if (c.decoded) {
      EXPECT_EQ(tok->decode(c.ids), *c.decoded) << GetParam() << " case " << i;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, FixtureIds,
                         testing::Values("gpt2", "gpt2_prefix", "llama3", "qwen2", "spm",
                                         "spm_legacy", "spm_no_prefix", "spm_json",
                                         "spm_json_legacy"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace dsx::tokenizer
