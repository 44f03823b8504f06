// tokenizer.json behaviour beyond the fixture ids: round trips, special tokens and their flags,
// BOS/EOS from tokenizer_config.json, both merge forms, ignore_merges, unk handling.
#include <gtest/gtest.h>
#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <filesystem>

#include "tokenizer/hf_bpe_tokenizer.h"
#include "tokenizer/load_tokenizer.h"
#include "tokenizer/read_tokenizer_json.h"
#include "tokenizer_test_util.h"

namespace dsx::tokenizer {
namespace {

using testing_util::fixture;
using testing_util::small_tokenizer_json;
using testing_util::TempDir;
using Ids = std::vector<TokenId>;

const std::string kMixed =
    "Grüße, мир! 你好 👨‍👩‍👧‍👦 x\r\n\r\n  12345\tcafé 'LL";

TEST(HfBpe, DecodeGivesBackTheText) {
  for (const char* name : {"gpt2", "llama3"}) {
    auto tok = load_tokenizer(fixture(name));
    auto ids = tok->encode(kMixed, {.add_special_tokens = false});
    EXPECT_GT(ids.size(), 10u);
    EXPECT_EQ(tok->decode(ids), kMixed) << name;
  }
}

TEST(HfBpe, Qwen2NormalizesToNfcBeforeBpe) {
  auto tok = load_tokenizer(fixture("qwen2"));
  // "e" + combining acute is "é" after NFC: the same ids as the precomposed text.
  EXPECT_EQ(tok->encode("cafe\u0301"), tok->encode("caf\u00e9"));
  EXPECT_EQ(tok->decode(tok->encode("cafe\u0301")), "caf\u00e9");
}

TEST(HfBpe, SpecialTokensInTextBecomeTheirIds) {
  auto tok = load_tokenizer(fixture("llama3"));
  const TokenId eot = *tok->token_to_id("<|eot_id|>");
  auto ids = tok->encode("hi<|eot_id|>there", {.add_special_tokens = false});
  ASSERT_EQ(std::count(ids.begin(), ids.end(), eot), 1);
  // With split_special_tokens the same string is text: no control id appears.
  auto as_text =
      tok->encode("hi<|eot_id|>there", {.add_special_tokens = false, .split_special_tokens = true});
  EXPECT_EQ(std::count(as_text.begin(), as_text.end(), eot), 0);
  EXPECT_EQ(tok->decode(as_text), "hi<|eot_id|>there");
  // skip_special_tokens leaves them out of the text.
  EXPECT_EQ(tok->decode(ids, {.skip_special_tokens = true}), "hithere");
  EXPECT_EQ(tok->decode(ids), "hi<|eot_id|>there");
}

TEST(HfBpe, Llama3AddsBeginOfTextFromItsTemplate) {
  auto tok = load_tokenizer(fixture("llama3"));
  const TokenId bos = *tok->token_to_id("<|begin_of_text|>");
  EXPECT_EQ(tok->bos_id(), bos);
  EXPECT_EQ(tok->eos_id(), *tok->token_to_id("<|end_of_text|>"));
  auto with = tok->encode("abc");
  auto without = tok->encode("abc", {.add_special_tokens = false});
  ASSERT_EQ(with.size(), without.size() + 1);
  EXPECT_EQ(with.front(), bos);
  EXPECT_EQ(Ids(with.begin() + 1, with.end()), without);
}

TEST(HfBpe, Gpt2AndQwen2AddNothing) {
  for (const char* name : {"gpt2", "qwen2"}) {
    auto tok = load_tokenizer(fixture(name));
    EXPECT_EQ(tok->encode("abc"), tok->encode("abc", {.add_special_tokens = false})) << name;
  }
  auto qwen = load_tokenizer(fixture("qwen2"));
  EXPECT_FALSE(qwen->bos_id());  // bos_token: null
  EXPECT_EQ(qwen->eos_id(), *qwen->token_to_id("<|endoftext|>"));
}

TEST(HfBpe, ConfigAddBosAndEosOverrideTheTemplate) {
  TempDir dir;
  std::filesystem::copy_file(fixture("gpt2") + "/tokenizer.json", dir.file("tokenizer.json"));
  dir.write("tokenizer_config.json",
            R"({"bos_token": {"content": "<|endoftext|>", "special": true},
                "eos_token": "<mask>", "add_bos_token": true, "add_eos_token": true})");
  auto tok = load_tokenizer(dir.path());
  auto plain = tok->encode("abc", {.add_special_tokens = false});
  Ids expected{0};
  expected.insert(expected.end(), plain.begin(), plain.end());
  expected.push_back(800);
  EXPECT_EQ(tok->encode("abc"), expected);
}

TEST(HfBpe, AddedTokenFlags) {
  auto tok = load_tokenizer(fixture("gpt2"));
  const TokenId mask = *tok->token_to_id("<mask>");
  const TokenId word = *tok->token_to_id("[WORD]");
  // lstrip: the spaces before <mask> belong to it.
  EXPECT_EQ(tok->encode("a   <mask>"), (Ids{tok->encode("a").front(), mask}));
  // single_word: inside a word it is text, alone it is the token.
  auto glued = tok->encode("x[WORD]y");
  EXPECT_EQ(std::count(glued.begin(), glued.end(), word), 0);
  auto alone = tok->encode("x [WORD] y");
  EXPECT_EQ(std::count(alone.begin(), alone.end(), word), 1);
  // A normalized, non-special added token is matched (and kept by skip_special_tokens).
  const TokenId engine = *tok->token_to_id(" dsx engine");
  auto ids = tok->encode("the dsx engine runs");
  ASSERT_EQ(std::count(ids.begin(), ids.end(), engine), 1);
  EXPECT_EQ(tok->decode(ids, {.skip_special_tokens = true}), "the dsx engine runs");
}

TEST(HfBpe, RstripTakesTheWhitespaceAfter) {
  auto tok = load_tokenizer(fixture("llama3"));
  const TokenId r = *tok->token_to_id("<|rstrip|>");
  EXPECT_EQ(tok->encode("<|rstrip|>   b", {.add_special_tokens = false}),
            (Ids{r, tok->encode("b", {.add_special_tokens = false}).front()}));
}

TEST(HfBpe, StringMergesGiveTheSameIdsAsPairs) {
  // The gpt2 fixture with every merge [left, right] rewritten in the legacy form "left right".
  rapidjson::Document doc;
  doc.Parse(testing_util::read(fixture("gpt2") + "/tokenizer.json").c_str());
  auto& merges = doc["model"]["merges"];
  ASSERT_GT(merges.Size(), 400u);
  for (auto& m : merges.GetArray()) {
    std::string line = std::string(m[0].GetString()) + " " + m[1].GetString();
    m.SetString(line.c_str(), static_cast<rapidjson::SizeType>(line.size()), doc.GetAllocator());
  }
  rapidjson::StringBuffer buffer;
  rapidjson::Writer<rapidjson::StringBuffer> writer(buffer);
  doc.Accept(writer);
  TempDir dir;
  dir.write("tokenizer.json", buffer.GetString());
  auto pairs = load_tokenizer(fixture("gpt2") + "/tokenizer.json");
  auto strings = load_tokenizer(dir.file("tokenizer.json"));
  EXPECT_EQ(strings->encode(kMixed), pairs->encode(kMixed));
  EXPECT_LT(strings->encode(kMixed).size(), kMixed.size() / 2);  // the merges did apply
}

// Vocabulary a b c ab bc abc; merges bc (rank 0), then a+bc is not a merge, ab (rank 1),
// ab+c (rank 2). "abc" by merges: bc first, then a, bc. With ignore_merges the whole word
// is a token: abc.
TEST(HfBpe, IgnoreMergesTakesAWholeWordToken) {
  std::vector<std::string> vocab{"a", "b", "c", "ab", "bc", "abc"};
  std::vector<std::pair<std::string, std::string>> merges{{"b", "c"}, {"a", "b"}, {"ab", "c"}};
  HfBpeTokenizer by_merges(parse_tokenizer_json(small_tokenizer_json(vocab, merges), "t.json"));
  HfBpeTokenizer whole(parse_tokenizer_json(
      small_tokenizer_json(vocab, merges, R"("ignore_merges":true,)"), "t.json"));
  EXPECT_EQ(by_merges.encode("abc"), (Ids{0, 4}));
  EXPECT_EQ(whole.encode("abc"), (Ids{5}));
  EXPECT_EQ(whole.encode("abca"), by_merges.encode("abca"));  // not a token: merges as usual
}

TEST(HfBpe, CharactersOutsideTheVocabularyBecomeUnkOrVanish) {
  std::vector<std::string> vocab{"<unk>", "a", "b"};
  HfBpeTokenizer with_unk(parse_tokenizer_json(
      small_tokenizer_json(vocab, {}, R"("unk_token":"<unk>","fuse_unk":true,)"), "t.json"));
  EXPECT_EQ(with_unk.encode("axyb"), (Ids{1, 0, 2}));  // xy: one fused unk
  HfBpeTokenizer without(parse_tokenizer_json(small_tokenizer_json(vocab, {}), "t.json"));
  EXPECT_EQ(without.encode("axyb"), (Ids{1, 2}));  // as HF's BPE: left out
}

TEST(HfBpe, RepeatedWordsComeFromTheCacheWithTheSameIds) {
  auto tok = load_tokenizer(fixture("gpt2"));
  std::string text;
  for (int i = 0; i < 200; ++i) text += " Straße 12345 мир";
  auto once = tok->encode(" Straße 12345 мир");
  auto many = tok->encode(text);
  ASSERT_EQ(many.size(), once.size() * 200);
  for (size_t i = 0; i < many.size(); ++i) ASSERT_EQ(many[i], once[i % once.size()]);
}

TEST(HfBpe, VocabSizeCountsAddedTokens) {
  auto tok = load_tokenizer(fixture("gpt2"));
  EXPECT_EQ(tok->vocab_size(), 803);  // 800 trained + <mask>, [WORD], " dsx engine"
  EXPECT_NE(tok->describe().find("byte-level BPE"), std::string::npos);
}

}  // namespace
}  // namespace dsx::tokenizer
