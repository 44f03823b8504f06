// A SentencePiece Unigram model encoded word by word through the word cache gives the library's
// ids for the whole text: the charsmap check, the models that qualify, and the ids, on the
// fixture's scores and on scores rewritten so that every word's segmentations tie or nearly tie
// (where float rounding along the whole text decides, and the words alone would differ).
#include <gtest/gtest.h>
#include <rapidjson/document.h>
#include <sentencepiece_processor.h>

#include <cstring>

#include "tokenizer/json_file.h"
#include "tokenizer/load_tokenizer.h"
#include "tokenizer/sentencepiece_charsmap.h"
#include "tokenizer/sentencepiece_model_file.h"
#include "tokenizer/sentencepiece_unigram_words.h"
#include "tokenizer/sentencepiece_words.h"
#include "tokenizer_test_util.h"

namespace dsx::tokenizer {
namespace {

using testing_util::fixture;
using testing_util::read;

const std::string kSpace = "\xE2\x96\x81";

std::string unigram_model() { return read(fixture("spm_unigram") + "/tokenizer.model"); }

// A darts-clone trie with one key, `key`, rewritten to `rewrite`: node i of the chain sits at
// 256 * i + its byte, its children at 256 * (i + 1), its leaf (byte 0) there too.
std::string one_key_charsmap(std::string_view key, std::string_view rewrite) {
  std::vector<uint32_t> units(256 * (key.size() + 2));
  uint32_t node = 0;
  for (size_t i = 0; i <= key.size(); ++i) {
    const uint32_t children = 256 * uint32_t(i + 1);
    const uint32_t label = i == 0 ? 0 : static_cast<unsigned char>(key[i - 1]);
    const uint32_t leaf = i == key.size() ? 1u << 8 : 0;
    units[node] = label | leaf | ((node ^ children) << 10);
    if (i < key.size()) node = children ^ static_cast<unsigned char>(key[i]);
  }
  units[256 * (key.size() + 1)] = 1u << 31;  // the leaf: the rewrite at offset 0
  const uint32_t bytes = uint32_t(units.size() * 4);
  std::string blob(4 + bytes, '\0');
  std::memcpy(blob.data(), &bytes, 4);
  std::memcpy(blob.data() + 4, units.data(), bytes);
  return blob + std::string(rewrite) + '\0';
}

// Protobuf's wire format, as far as rewriting scores in place needs (see
// sentencepiece_model_file.cpp).
struct Wire {
  std::string& bytes;
  size_t at = 0;

  uint64_t varint() {
    uint64_t value = 0;
    for (int shift = 0;; shift += 7) {
      const auto byte = uint8_t(bytes[at++]);
      value |= uint64_t(byte & 0x7F) << shift;
      if (!(byte & 0x80)) return value;
    }
  }
  // Skips the value of a field of this wire type, but for a message's bytes; returns its length.
  size_t skip_or_length(uint64_t wire) {
    if (wire == 0) varint();
    if (wire == 1) at += 8;
    if (wire == 5) at += 4;
    return wire == 2 ? varint() : 0;
  }
};

// Model bytes with every Normal piece's score replaced by score(piece) (float, so in place).
template <class Score>
std::string rescored(const std::string& model, Score score) {
  const auto file = parse_sentencepiece_model(model, "fixture");
  std::string out = model;
  Wire top{out};
  for (size_t piece = 0; top.at < out.size();) {
    const uint64_t key = top.varint();
    const size_t length = top.skip_or_length(key & 7);
    if (key >> 3 == 1 && (key & 7) == 2) {  // a SentencePiece: piece = 1, score = 2
      const auto& p = file.pieces[piece++];
      Wire inner{out, top.at};
      while (inner.at < top.at + length) {
        const uint64_t field = inner.varint();
        if (field == (2 << 3 | 5) && p.type == PieceType::Normal) {
          const float value = score(p.piece);
          std::memcpy(out.data() + inner.at, &value, 4);
        }
        inner.at += inner.skip_or_length(field & 7);
      }
    }
    top.at += length;
  }
  return out;
}

size_t characters(const std::string& piece) {
  size_t n = 0;
  for (unsigned char c : piece) n += (c & 0xC0) != 0x80;
  return n;
}

// The multilingual sample of the spm fixture's cases.json.
std::string sample_text() {
  const std::string path = fixture("spm") + "/cases.json";
  const rapidjson::Document cases = json::parse(json::read_file(path), path);
  const auto& text = cases.GetArray()[0]["text"];
  return {text.GetString(), text.GetStringLength()};
}

// The sample cut into documents at '\n', whole, and three times over (where the score before
// the last words reaches thousands), then edge cases of whitespace and normalization.
std::vector<std::string> documents() {
  std::vector<std::string> docs;
  const std::string text = sample_text();
  for (size_t start = 0; start < text.size();) {
    const size_t end = std::min(text.find('\n', start), text.size() - 1) + 1;
    docs.push_back(text.substr(start, end - start));
    start = end;
  }
  docs.push_back(text);
  docs.push_back(text + text + text);
  for (const char* edge : {"",
                           " ",
                           "a ",
                           " a",
                           "a  b",
                           "  leading and trailing  ",
                           "\t a \r\n b",
                           "x\u00A0 y",
                           "x\u200B y \u200B z",
                           "x\u2581 y \u2581z",
                           "x\u2581\u200B y",
                           "x\u3000 y\u3000",
                           "a \u2581 b",
                           "\uFDFA \uFDFA x",
                           "\u00A8 \u00A8x",
                           "12345 67 890",
                           "\u3000 x \u00A0",
                           "end\n",
                           " \n \n",
                           "a\tb\u00A0c\u3000d\re\nf",
                           "a \t\u00A0 b\u3000\u3000",
                           "\t\tx \u00A0\u200B y",
                           "ﬁ ﬂ ｆｕｌｌ ｗｉｄｔｈ ①"}) {
    docs.push_back(edge);
  }
  docs.push_back("a " + std::string(300, 'x') + " b");  // a word too long for the cache
  return docs;
}

// Encodes every document through a folder with `model`, twice (the second from the cache), and
// expects the library's whole-text ids; returns how many documents the words alone, each encoded
// by the library and put together, would have got wrong.
int expect_library_ids(const std::string& model) {
  testing_util::TempDir dir;
  dir.write("tokenizer.model", model);
  dir.write("tokenizer_config.json", R"({"add_bos_token": false})");
  sentencepiece::SentencePieceProcessor library;
  EXPECT_TRUE(library.LoadFromSerializedProto(model).ok());
  auto tok = load_tokenizer(dir.path());
  EXPECT_NE(tok->describe().find("word by word"), std::string::npos) << tok->describe();
  int naive_wrong = 0;
  const auto spaces = read_sentencepiece_spec(model).spaces_read_alone;
  for (const std::string& doc : documents()) {
    std::vector<int> whole;
    EXPECT_TRUE(library.Encode(doc, &whole).ok());
    const std::vector<TokenId> expected(whole.begin(), whole.end());
    for (int pass = 0; pass < 2; ++pass) {
      EXPECT_EQ(tok->encode(doc, {.add_special_tokens = false}), expected)
          << "text: \"" << doc << "\"";
    }
    std::vector<std::string_view> words;
    unigram_words(doc, spaces, words);
    std::vector<TokenId> naive;
    for (std::string_view word : words) {
      std::vector<int> ids;
      EXPECT_TRUE(library.Encode(word, &ids).ok());
      naive.insert(naive.end(), ids.begin(), ids.end());
    }
    naive_wrong += naive != expected;
  }
  return naive_wrong;
}

TEST(SentencePieceCharsmap, WhiteSpaceReadAloneAsASpace) {
  using S = std::vector<std::string>;
  const auto spec = read_sentencepiece_spec(unigram_model());
  EXPECT_TRUE(spec.has_charsmap);  // nmt_nfkc
  EXPECT_EQ(spec.spaces_read_alone, (S{" ", "\t", "\n", "\r", "\u00A0", "\u3000"}));
  EXPECT_TRUE(spec.remove_extra_whitespaces);
  EXPECT_EQ(spaces_read_alone(""), S{" "});  // no charsmap: a tab stays a tab
  EXPECT_EQ(spaces_read_alone(one_key_charsmap("a", "b")), S{" "});
  EXPECT_EQ(spaces_read_alone(one_key_charsmap("\t", " ")), (S{" ", "\t"}));
  EXPECT_EQ(spaces_read_alone(one_key_charsmap("\u00A0", " ")), (S{" ", "\u00A0"}));
  EXPECT_EQ(spaces_read_alone(one_key_charsmap("\u00A0", "_")), S{" "});
  EXPECT_EQ(spaces_read_alone(one_key_charsmap("\u3000\u3000", " ")), S{" "});
  EXPECT_FALSE(charsmap_rewrites_spaces(one_key_charsmap("a", "b")));
  EXPECT_TRUE(charsmap_rewrites_spaces(one_key_charsmap("a ", "b")));  // inside a key
  EXPECT_TRUE(charsmap_rewrites_spaces(one_key_charsmap(" x", "y")));  // starting a longer one
  EXPECT_TRUE(charsmap_rewrites_spaces(one_key_charsmap(" ", "_")));   // not to a space
  EXPECT_FALSE(charsmap_rewrites_spaces(one_key_charsmap(" ", " ")));
  // Not a trie: the safe answer.
  EXPECT_TRUE(spaces_read_alone("\x01\x02").empty());
  EXPECT_TRUE(charsmap_rewrites_spaces(std::string("\xFF\xFF\x00\x00", 4) + "abcd"));
}

TEST(SentencePieceUnigramWords, WordsStartAtWhiteSpaceAfterAnotherCharacter) {
  using W = std::vector<std::string>;
  auto words_of = [](std::string_view text) {
    std::vector<std::string_view> words;
    unigram_words(text, {" ", "\t", "\u3000"}, words);
    return W(words.begin(), words.end());
  };
  EXPECT_EQ(words_of(""), W{});
  EXPECT_EQ(words_of("It is\t so"), (W{"It", " is", "\t so"}));
  EXPECT_EQ(words_of("a\u3000b\u00A0c"), (W{"a", "\u3000b\u00A0c"}));
  EXPECT_EQ(words_of("  lead end "), (W{"  lead", " end "}));
  EXPECT_EQ(words_of("x\u2581 y \u2581z"), (W{"x\u2581 y", " \u2581z"}));
}

TEST(SentencePieceUnigramWords, OnlyModelsWhosePiecesStayInsideWordsQualify) {
  auto model = parse_sentencepiece_model(unigram_model(), "fixture");
  EXPECT_TRUE(unigram_encodes_word_by_word(model));
  auto user_defined = model;
  user_defined.pieces.push_back({"dsx", 0, PieceType::UserDefined});
  EXPECT_FALSE(unigram_encodes_word_by_word(user_defined));
  auto across = model;
  across.pieces.push_back({"of" + kSpace + "the", -5, PieceType::Normal});
  EXPECT_FALSE(unigram_encodes_word_by_word(across));
  auto positive = model;
  positive.pieces.back().score = 0.5;
  EXPECT_FALSE(unigram_encodes_word_by_word(positive));
  for (auto change :
       {+[](SentencePieceSpec& s) { s.remove_extra_whitespaces = false; },
        +[](SentencePieceSpec& s) { s.spaces_read_alone.clear(); },
        +[](SentencePieceSpec& s) { s.add_dummy_prefix = false; },
        +[](SentencePieceSpec& s) { s.treat_whitespace_as_suffix = true; },
        +[](SentencePieceSpec& s) { s.model_type = SentencePieceSpec::ModelType::Bpe; }}) {
    auto changed = model;
    change(changed.spec);
    EXPECT_FALSE(unigram_encodes_word_by_word(changed));
  }
  auto no_space_piece = model;
  for (auto& p : no_space_piece.pieces) {
    if (p.piece == kSpace) p.type = PieceType::Unused;
  }
  EXPECT_FALSE(unigram_encodes_word_by_word(no_space_piece));
}

TEST(SentencePieceUnigramWords, WordByWordIdsAreTheWholeTextsIds) {
  expect_library_ids(unigram_model());
}

TEST(SentencePieceUnigramWords, NearTiesGoToTheLibraryWhole) {
  // 0.1 per character: every segmentation of a word ties in exact arithmetic; the float sums
  // differ in their last bits, and which wins depends on the score before the word.
  const std::string ties = rescored(
      unigram_model(), [](const std::string& piece) { return -0.1f * float(characters(piece)); });
  EXPECT_GT(expect_library_ids(ties), 0) << "the words alone never differed: a weak test";
  // Margins of 1e-4 per piece: safe in short documents, not after thousands of characters.
  const std::string near = rescored(unigram_model(), [](const std::string& piece) {
    return -0.1f * float(characters(piece)) - 1e-4f * float(piece.size() % 7);
  });
  EXPECT_GT(expect_library_ids(near), 0) << "the words alone never differed: a weak test";
}

TEST(SentencePieceUnigramWords, AWordKeepsItsMarginAndWhetherItJoinsCleanly) {
  sentencepiece::SentencePieceProcessor library;
  ASSERT_TRUE(library.LoadFromSerializedProto(unigram_model()).ok());
  const UnigramWord plain = encode_unigram_word(library, "the", "fixture");
  EXPECT_FALSE(plain.ids.empty());
  EXPECT_GT(plain.best_score, 0);
  EXPECT_GT(plain.max_prefix_score, 1e3);  // a trained model's margins are wide
  EXPECT_TRUE(plain.joins_cleanly);
  EXPECT_TRUE(plain.fits_after(100, false));
  // Dropped at its end as trailing space: "▁" from a raw U+2581 before a removed character.
  const UnigramWord dropped = encode_unigram_word(library, "x\u2581\u200B", "fixture");
  EXPECT_FALSE(dropped.joins_cleanly);
  EXPECT_TRUE(dropped.fits_after(0, true));
  EXPECT_FALSE(dropped.fits_after(0, false));
  EXPECT_TRUE(encode_unigram_word(library, " \t", "fixture").joins_cleanly);
  EXPECT_TRUE(encode_unigram_word(library, " \t", "fixture").ids.empty());
}

}  // namespace
}  // namespace dsx::tokenizer
