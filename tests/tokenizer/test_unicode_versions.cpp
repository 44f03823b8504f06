// Characters of Unicode 15.0, 15.1 and 16.0 split and encode as HF tokenizers 0.23 (Unicode 16.0)
// splits and encodes them, although Debian 12's PCRE2 has Unicode 14.0 tables
// (regex_unicode_classes.h). The expectations in data/unicode16_cases.json are tokenizers' own
// (compat/make_fixtures.py unicode16); the text also holds a 17.0 character, which neither knows.
#include <gtest/gtest.h>
#include <rapidjson/document.h>

#include <string>
#include <vector>

#include "tokenizer/json_file.h"
#include "tokenizer/load_tokenizer.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/regex_unicode_classes.h"
#include "tokenizer_test_util.h"

namespace dsx::tokenizer {
namespace {

using testing_util::fixture;

std::string str(const rapidjson::Value& v) { return {v.GetString(), v.GetStringLength()}; }

rapidjson::Document cases() {
  const std::string path = fixture("unicode16_cases.json");
  return json::parse(json::read_file(path), path);
}

const char* pattern_named(const std::string& name) {
  if (name == "gpt2") return kGpt2Pattern;
  if (name == "llama3") return kLlama3Pattern;
  return kQwen2Pattern;
}

TEST(UnicodeVersions, PatternsSplitNewCharactersAsTokenizersDoes) {
  rapidjson::Document doc = cases();
  ASSERT_EQ(doc["pieces"].Size(), 15u);
  for (const auto& c : doc["pieces"].GetArray()) {
    RegexSplitter splitter(pattern_named(str(c["pattern"])), false, "test");
    const std::string text = str(c["text"]);
    std::vector<TextSpan> spans;
    splitter.find_all(text, spans);
    std::vector<std::string> pieces, expected;
    for (TextSpan s : spans) pieces.push_back(text.substr(s.begin, s.end - s.begin));
    for (const auto& p : c["pieces"].GetArray()) expected.push_back(str(p));
    EXPECT_EQ(pieces, expected) << str(c["pattern"]) << ": " << text;
  }
}

TEST(UnicodeVersions, FixturesEncodeNewCharactersAsTokenizersDoes) {
  rapidjson::Document doc = cases();
  ASSERT_EQ(doc["ids"].Size(), 20u);
  for (const auto& c : doc["ids"].GetArray()) {
    auto tok = load_tokenizer(fixture(str(c["fixture"])));
    std::vector<TokenId> expected;
    for (const auto& id : c["ids"].GetArray()) expected.push_back(id.GetInt());
    EXPECT_EQ(tok->encode(str(c["text"]), {.add_special_tokens = false}), expected)
        << str(c["fixture"]) << ": " << str(c["text"]);
  }
}

TEST(UnicodeVersions, OnlyTextWithNewCharactersNeedsTheExtendedClasses) {
  EXPECT_FALSE(may_hold_added_characters("plain ASCII, long enough for the 8-byte steps"));
  EXPECT_FALSE(
      may_hold_added_characters("Größe 我能吞下玻璃 👍🏽 नमस्ते ﷺ"));
  EXPECT_TRUE(may_hold_added_characters("ASCII before it: \u1C89"));  // 16.0, 3 bytes
  EXPECT_TRUE(may_hold_added_characters("\xF0\x91\xBC\x80 Kawi"));    // U+11F00, 15.0
  EXPECT_TRUE(may_hold_added_characters("k\u0CF3"));                  // 15.0
  // Wherever the character falls in the scan's 8-byte steps, after characters of 1 and 2 bytes.
  for (size_t shift = 0; shift < 16; ++shift) {
    const std::string before(shift, 'a');
    EXPECT_TRUE(may_hold_added_characters(before + "Жж\u1C89 and more text")) << shift;
    EXPECT_FALSE(may_hold_added_characters(before + "Жж\u4E2D and more text")) << shift;
  }
}

TEST(UnicodeVersions, CategoryClassesGainTheCharactersAssignedAfterPcre2sTables) {
  if (std::stoi(pcre2_unicode_version()) >= 16)
    GTEST_SKIP() << "PCRE2's own tables are Unicode 16.0 or later";
  // U+1C89 and U+1C8A: Lu and Ll since Unicode 16.0.
  const std::string letters = with_unicode_16_categories(R"(\p{L}+)");
  EXPECT_EQ(letters.rfind(R"([\p{L}\x{)", 0), 0u) << letters;
  EXPECT_NE(letters.find(R"(\x{1C89}-\x{1C8A})"), std::string::npos) << letters;
  EXPECT_EQ(letters.back(), '+');
  // Inside a class the ranges follow the property; a negated one outside becomes [^...].
  const std::string in_class = with_unicode_16_categories(R"([^\r\n\p{L}\p{N}]?)");
  EXPECT_EQ(in_class.rfind(R"([^\r\n\p{L}\x{)", 0), 0u) << in_class;
  EXPECT_NE(in_class.find(R"(\p{N}\x{)"), std::string::npos) << in_class;
  EXPECT_EQ(with_unicode_16_categories(R"(\P{N})").rfind(R"([^\p{N}\x{)", 0), 0u);
  // \d is \p{Nd} (PCRE2_UCP): Kawi digits (15.0) and Garay's (16.0) are digits.
  EXPECT_EQ(with_unicode_16_categories(R"(\d+)").rfind(R"([\p{Nd}\x{)", 0), 0u);
  // Left alone: \p{C} (it would lose characters), scripts, \P inside a class, literals.
  for (const char* same :
       {R"(\p{Cn}\p{C})", R"(\p{Han}+)", R"([\P{L}x])", R"(\Q\p{L}\E)", R"([\]\p{Zzzz}])"}) {
    EXPECT_EQ(with_unicode_16_categories(same), same);
  }
  // A class that starts with ']' is one class: the property inside it is extended in place.
  EXPECT_EQ(with_unicode_16_categories(R"([]\p{Lu}])").rfind(R"([]\p{Lu}\x{1C89}-\x{1C89})", 0),
            0u);
}

}  // namespace
}  // namespace dsx::tokenizer
