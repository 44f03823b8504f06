// Parallel encoding gives the serial ids: a large text cut at line starts, and a batch of
// documents, for every fixture tokenizer.
#include <gtest/gtest.h>
#include <rapidjson/document.h>

#include <random>

#include "tokenizer/json_file.h"
#include "tokenizer/load_tokenizer.h"
#include "tokenizer/parallel_encode.h"
#include "tokenizer_test_util.h"

namespace dsx::tokenizer {
namespace {

using testing_util::fixture;

// About 600 KB: the fixture's case texts (multilingual sample, whitespace runs, CRLF, special
// tokens) in random order, joined by newlines, some starting with a letter, some not.
std::string large_text(const std::string& name) {
  std::string path = fixture(name) + "/cases.json";
  rapidjson::Document doc = json::parse(json::read_file(path), path);
  std::vector<std::string> texts;
  for (const auto& c : doc.GetArray())
    texts.emplace_back(c["text"].GetString(), c["text"].GetStringLength());
  std::mt19937 rng(11);
  std::string out;
  const char* joins[] = {"\n", "\nA", ".\nb", "\n\n", " \nc", "\r\nd", "\n7"};
  while (out.size() < 600000) {
    out += texts[rng() % texts.size()];
    out += joins[rng() % 7];
  }
  return out;
}

class ParallelEncode : public testing::TestWithParam<std::string> {};

TEST_P(ParallelEncode, LargeTextGivesTheSerialIds) {
  auto tok = load_tokenizer(fixture(GetParam()));
  std::string text = large_text(GetParam());
  // SentencePiece (its own library or Metaspace) and a prefix space before every piece rule the
  // cuts out: one piece.
  const bool cuts = GetParam() == "gpt2" || GetParam() == "llama3" || GetParam() == "qwen2";
  EXPECT_EQ(tok->cuts_at_line_starts(), cuts);
  EXPECT_GT(line_start_cuts(text, 64 * 1024).size(), 4u);  // the text is cut many times
  for (bool special : {true, false}) {
    EncodeOptions options{.add_special_tokens = special};
    auto serial = tok->encode(text, options);
    auto parallel = encode_large_text(*tok, text, options, 4);
    ASSERT_EQ(parallel.size(), serial.size()) << "add_special_tokens " << special;
    EXPECT_TRUE(parallel == serial) << "add_special_tokens " << special;
  }
}

TEST_P(ParallelEncode, DocumentsGiveTheirOwnIds) {
  auto tok = load_tokenizer(fixture(GetParam()));
  std::string text = large_text(GetParam());
  std::vector<std::string_view> docs;
  for (size_t pos = 0; pos < text.size(); pos += 5000)
    docs.push_back(std::string_view(text).substr(pos, 5000));
  // Cutting every 5000 bytes may split a UTF-8 character: keep whole characters only.
  for (auto& d : docs) {
    while (!d.empty() && (static_cast<unsigned char>(d.front()) & 0xC0) == 0x80) d.remove_prefix(1);
    while (!d.empty() && (static_cast<unsigned char>(d.back()) & 0x80)) d.remove_suffix(1);
  }
  auto batch = encode_documents(*tok, docs, {}, 3);
  ASSERT_EQ(batch.size(), docs.size());
  for (size_t i = 0; i < docs.size(); ++i) ASSERT_EQ(batch[i], tok->encode(docs[i])) << i;
}

TEST_P(ParallelEncode, AppendedDocumentsAreEachDocumentsIdsBetweenBeforeAndAfter) {
  auto tok = load_tokenizer(fixture(GetParam()));
  std::string text = large_text(GetParam());  // about 600 KB: several runs of documents
  std::vector<std::string_view> lines;
  for (size_t pos = 0; pos < text.size();) {
    size_t end = std::min(text.find('\n', pos), text.size() - 1) + 1;
    lines.push_back(std::string_view(text).substr(pos, end - pos)), pos = end;
  }
  const std::vector<TokenId> before{7}, after{8, 9};
  // The second call, on fewer documents, reuses the first call's buffers.
  for (size_t count : {lines.size(), lines.size() / 3}) {
    std::span<const std::string_view> docs(lines.data(), count);
    std::vector<TokenId> out{42}, expected{42};
    std::vector<size_t> starts, expected_starts;
    append_documents(*tok, docs, {}, 3, before, after, out, &starts);
    for (std::string_view doc : docs) {
      expected_starts.push_back(expected.size());
      expected.insert(expected.end(), before.begin(), before.end());
      tok->encode_into(doc, {}, expected);
      expected.insert(expected.end(), after.begin(), after.end());
    }
    ASSERT_EQ(out, expected);
    ASSERT_EQ(starts, expected_starts);
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, ParallelEncode,
                         testing::Values("gpt2", "gpt2_prefix", "llama3", "qwen2", "spm", "spm_json",
                                         "spm_json_legacy"),
                         [](const auto& info) { return info.param; });

TEST(LineStartCuts, CutOnlyBetweenANonSpaceAndALetter) {
  std::string text = "aa\nbb \ncc\n\ndd.\nEe\n1f";
  auto cuts = line_start_cuts(text, 1);
  // After "aa\n" (3) and ".\n" (15); not after " \n", "\n\n" or before a digit.
  EXPECT_EQ(cuts, (std::vector<size_t>{3, 15}));
}

}  // namespace
}  // namespace dsx::tokenizer
