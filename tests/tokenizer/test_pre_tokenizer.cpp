// Pre-tokenizers: GPT-2's and Llama 3's regexes on the example measured with HF tokenizers
// (docs ref 3.3), and the five Split behaviours on HF's documented example.
#include <gtest/gtest.h>

#include "tokenizer/pre_tokenizer.h"

namespace dsx::tokenizer {
namespace {

std::vector<std::string> pieces(const PreTokenizer& pre, std::string_view text) {
  PreTokenizeScratch scratch;
  pre.split(text, scratch);
  return {scratch.pieces.begin(), scratch.pieces.end()};
}

PreTokenizer split_with(const std::string& pattern, SplitBehavior behavior, bool invert = false,
                        bool literal = false) {
  PreTokenizer pre;
  pre.add_step({PreTokenizeStep::Kind::Split,
                std::make_shared<RegexSplitter>(pattern, literal, "test"), behavior, invert});
  return pre;
}

using Pieces = std::vector<std::string>;

TEST(PreTokenizer, Gpt2PatternSplitsAsHuggingFace) {
  auto pre = split_with(kGpt2Pattern, SplitBehavior::Isolated);
  EXPECT_EQ(pieces(pre, "Hello world! It's 12345  x\n\ny"),
            (Pieces{"Hello", " world", "!", " It", "'s", " 12345", " ", " x", "\n", "\n", "y"}));
}

TEST(PreTokenizer, Llama3PatternGroupsDigitsInThreesAndNewlines) {
  auto pre = split_with(kLlama3Pattern, SplitBehavior::Isolated);
  EXPECT_EQ(
      pieces(pre, "Hello world! It's 12345  x\n\ny"),
      (Pieces{"Hello", " world", "!", " It", "'s", " ", "123", "45", " ", " x", "\n\n", "y"}));
  // (?i:...) matches the contraction in any case; \p{L} takes any script.
  EXPECT_EQ(pieces(pre, "WE'LL Привет"), (Pieces{"WE", "'LL", " Привет"}));
}

TEST(PreTokenizer, SplitBehavioursFollowHuggingFace) {
  const std::string text = "the-final--countdown";
  EXPECT_EQ(pieces(split_with("-", SplitBehavior::Removed), text),
            (Pieces{"the", "final", "countdown"}));
  EXPECT_EQ(pieces(split_with("-", SplitBehavior::Isolated), text),
            (Pieces{"the", "-", "final", "-", "-", "countdown"}));
  EXPECT_EQ(pieces(split_with("-", SplitBehavior::MergedWithPrevious), text),
            (Pieces{"the-", "final-", "-", "countdown"}));
  EXPECT_EQ(pieces(split_with("-", SplitBehavior::MergedWithNext), text),
            (Pieces{"the", "-final", "-", "-countdown"}));
  EXPECT_EQ(pieces(split_with("-", SplitBehavior::Contiguous), text),
            (Pieces{"the", "-", "final", "--", "countdown"}));
}

TEST(PreTokenizer, InvertKeepsTheMatchesAsTheText) {
  // Inverted, the letters are the "delimiters" and Removed drops them.
  EXPECT_EQ(pieces(split_with("[a-z]+", SplitBehavior::Removed, true), "ab, cd!"),
            (Pieces{"ab", "cd"}));
}

TEST(PreTokenizer, StringPatternIsLiteral) {
  EXPECT_EQ(pieces(split_with(".", SplitBehavior::Removed, false, true), "a.b.c"),
            (Pieces{"a", "b", "c"}));
}

TEST(PreTokenizer, PrefixSpaceIsAddedOnlyWhereMissing) {
  PreTokenizer pre;
  pre.add_step({PreTokenizeStep::Kind::PrefixSpace, nullptr, SplitBehavior::Isolated, false});
  EXPECT_EQ(pieces(pre, "word"), (Pieces{" word"}));
  EXPECT_EQ(pieces(pre, " word"), (Pieces{" word"}));
  EXPECT_EQ(pieces(pre, ""), (Pieces{}));
}

TEST(PreTokenizer, LongWhitespaceRunsDoNotExhaustTheRegexStack) {
  auto pre = split_with(kLlama3Pattern, SplitBehavior::Isolated);
  std::string text = "a" + std::string(200000, ' ') + "b";
  auto got = pieces(pre, text);
  ASSERT_EQ(got.size(), 3u);  // "a", 199999 spaces (\s+(?!\S)), " b"
  EXPECT_EQ(got[1].size(), 199999u);
  EXPECT_EQ(got[2], " b");
}

TEST(PreTokenizer, BadPatternIsAnErrorNamingIt) {
  try {
    RegexSplitter bad("(unclosed", false, "x/tokenizer.json: pre_tokenizer.pattern");
    FAIL() << "no error";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("x/tokenizer.json: pre_tokenizer.pattern"),
              std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("(unclosed"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace dsx::tokenizer
