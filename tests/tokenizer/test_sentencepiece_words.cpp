// A SentencePiece BPE model encoded word by word through the word cache gives the library's ids
// for the whole text: the model settings that allow it, where words start, and the ids.
#include <gtest/gtest.h>
#include <sentencepiece_processor.h>

#include "tokenizer/load_tokenizer.h"
#include "tokenizer/sentencepiece_model_file.h"
#include "tokenizer/sentencepiece_words.h"
#include "tokenizer_test_util.h"

namespace dsx::tokenizer {
namespace {

using testing_util::fixture;
using testing_util::read;
using Type = SentencePieceSpec::ModelType;

std::vector<std::string> words_of(std::string_view text) {
  std::vector<std::string_view> words;
  sentencepiece_words(text, words);
  return {words.begin(), words.end()};
}

SentencePieceSpec llama2_like() {
  SentencePieceSpec spec;
  spec.model_type = Type::Bpe;
  spec.remove_extra_whitespaces = false;
  return spec;
}

TEST(SentencePieceSpec, ReadsTheLlama2StyleFixturesSettings) {
  const auto spec = read_sentencepiece_spec(read(fixture("spm") + "/tokenizer.model"));
  EXPECT_EQ(spec.model_type, Type::Bpe);
  EXPECT_FALSE(spec.has_charsmap);  // normalization_rule_name=identity
  EXPECT_TRUE(spec.add_dummy_prefix);
  EXPECT_FALSE(spec.remove_extra_whitespaces);
  EXPECT_TRUE(spec.escape_whitespaces);
  EXPECT_FALSE(spec.treat_whitespace_as_suffix);
}

TEST(SentencePieceSpec, BytesThatAreNoMessageGiveTheDefaults) {
  const std::string cut_short =
      "\x12\x05"
      "ab";  // TrainerSpec of 5 bytes, 2 there
  for (std::string_view bytes :
       {std::string_view(""), std::string_view(cut_short), std::string_view("\xFF", 1)}) {
    const auto spec = read_sentencepiece_spec(bytes);
    EXPECT_EQ(spec.model_type, Type::Unigram);
    EXPECT_TRUE(spec.remove_extra_whitespaces);
  }
}

TEST(SentencePieceWords, OnlyBpeThatNormalizesSpacesAloneGoesWordByWord) {
  const std::vector<std::string> pieces{"<unk>", "<s>", "\xE2\x96\x81\xE2\x96\x81",
                                        "\xE2\x96\x81the", "ab"};
  EXPECT_TRUE(encodes_word_by_word(llama2_like(), pieces));
  auto unigram = llama2_like();
  unigram.model_type = Type::Unigram;
  EXPECT_FALSE(encodes_word_by_word(unigram, pieces));
  auto nfkc = llama2_like();
  nfkc.has_charsmap = true;
  EXPECT_FALSE(encodes_word_by_word(nfkc, pieces));
  EXPECT_FALSE(encodes_word_by_word(SentencePieceSpec{.model_type = Type::Bpe}, pieces));
  auto across = pieces;
  across.push_back("of\xE2\x96\x81the");  // a piece that spans two words
  EXPECT_FALSE(encodes_word_by_word(llama2_like(), across));
}

TEST(SentencePieceWords, WordsStartAtASpaceAfterAnotherCharacter) {
  using W = std::vector<std::string>;
  EXPECT_EQ(words_of(""), W{});
  EXPECT_EQ(words_of(" "), W{" "});
  EXPECT_EQ(words_of("It is  so"), (W{"It", " is", "  so"}));
  EXPECT_EQ(words_of("  lead"), W{"  lead"});
  EXPECT_EQ(words_of("end "), W{"end "});  // a last ' ' stays: alone it would encode to nothing
  EXPECT_EQ(words_of("a \n b"), (W{"a", " \n", " b"}));
  EXPECT_EQ(words_of("x\xE2\x96\x81 y"), W{"x\xE2\x96\x81 y"});  // "▁▁" may be one piece
  EXPECT_EQ(library_input(" is", 1), "is");
  EXPECT_EQ(library_input("  lead", 0), "  lead");
}

TEST(SentencePieceWords, WordByWordIdsAreTheLibrarysIds) {
  // The fixture's model alone: without tokenizer_class LlamaTokenizer it is the library's to
  // encode (with the class, transformers' rules apply: llama_tokenizer_from_model.h).
  testing_util::TempDir dir;
  dir.write("tokenizer.model", read(fixture("spm") + "/tokenizer.model"));
  const std::string model = dir.file("tokenizer.model");
  sentencepiece::SentencePieceProcessor library;
  ASSERT_TRUE(library.Load(model).ok());
  auto tok = load_tokenizer(dir.path());
  EXPECT_NE(tok->describe().find("word by word"), std::string::npos) << tok->describe();
  std::string long_text;
  for (int i = 0; i < 50; ++i) {
    long_text += "Größe  und\tStraße, it's 12345 metres;   ";
    long_text += "你好 \n\n x\xE2\x96\x81 y ";
  }
  for (const std::string& text :
       {std::string(""), std::string(" "), std::string("a "), std::string(" a"),
        std::string("a  b"), std::string("  leading and trailing  "), std::string("\t a \r\n b"),
        std::string("x\xE2\x96\x81 y \xE2\x96\x81z"), std::string("ᚠᛇᚻ 𝔘𝔫𝔦 runes"), long_text}) {
    for (int pass = 0; pass < 2; ++pass) {  // the second pass takes the words from the cache
      std::vector<int> expected;
      ASSERT_TRUE(library.Encode(text, &expected).ok());
      EXPECT_EQ(tok->encode(text, {.add_special_tokens = false}),
                std::vector<TokenId>(expected.begin(), expected.end()))
          << "text: \"" << text << "\"";
    }
  }
}

}  // namespace
}  // namespace dsx::tokenizer
