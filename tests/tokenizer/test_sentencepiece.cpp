// tokenizer.model folders behind the common interface: read as transformers' LlamaTokenizer
// reads them where tokenizer_config.json names that class, else through sentencepiece; BOS by
// tokenizer_config.json, byte fallback round trips, the model's special ids, the model file read.
#include <gtest/gtest.h>

#include <filesystem>

#include "dsx/error.h"
#include "tokenizer/load_tokenizer.h"
#include "tokenizer/sentencepiece_model_file.h"
#include "tokenizer_test_util.h"

namespace dsx::tokenizer {
namespace {

using testing_util::fixture;
using testing_util::TempDir;

TEST(SentencePiece, IdsAndRulesOfALlama2StyleModel) {
  auto tok = load_tokenizer(fixture("spm"));
  EXPECT_EQ(tok->bos_id(), 1);
  EXPECT_EQ(tok->eos_id(), 2);
  EXPECT_EQ(tok->vocab_size(), 600);
  auto ids = tok->encode("héllo 你");
  ASSERT_GT(ids.size(), 2u);
  EXPECT_EQ(ids.front(), 1);  // add_bos_token: true
  EXPECT_EQ(tok->decode(ids), "<s> héllo 你");  // as transformers decodes it
  EXPECT_EQ(tok->decode(ids, {.skip_special_tokens = true}), "héllo 你");
  EXPECT_NE(tok->describe().find("LlamaTokenizer"), std::string::npos) << tok->describe();
}

TEST(SentencePiece, LlamaTokenizerClassGivesTransformersIdsAnyOtherSentencepieces) {
  auto llama = load_tokenizer(fixture("spm"));  // tokenizer_class LlamaTokenizer
  TempDir dir;
  std::filesystem::copy_file(fixture("spm") + "/tokenizer.model", dir.file("tokenizer.model"));
  dir.write("tokenizer_config.json", R"({"add_bos_token": true})");
  auto sentencepiece = load_tokenizer(dir.path());
  EXPECT_NE(sentencepiece->describe().find("SentencePiece from"), std::string::npos)
      << sentencepiece->describe();
  const TokenId one_space = *llama->token_to_id("\u2581"),
                two_spaces = *llama->token_to_id("\u2581\u2581");
  const EncodeOptions bare{.add_special_tokens = false};
  // sentencepiece puts its "\u2581" before a text that starts with a space; transformers does not.
  EXPECT_EQ(llama->encode(" Hello", bare).front(), one_space);
  EXPECT_EQ(sentencepiece->encode(" Hello", bare).front(), two_spaces);
  // "</s>" in the text is EOS for transformers, text for sentencepiece.
  EXPECT_EQ(llama->encode("a</s>", bare).back(), 2);
  EXPECT_NE(sentencepiece->encode("a</s>", bare).back(), 2);
  // Elsewhere the two agree: the merges derived from the vocabulary are sentencepiece's.
  const std::string text = "Hello  wörld, 你好 ᚠᛇᚻ!\n  indented 12345";
  EXPECT_EQ(llama->encode(text), sentencepiece->encode(text));
}

TEST(SentencePiece, ModelFileGivesPiecesTypesAndModelType) {
  SentencePieceModelFile model = read_sentencepiece_model(fixture("spm") + "/tokenizer.model");
  ASSERT_EQ(model.pieces.size(), 600u);
  EXPECT_EQ(model.spec.model_type, SentencePieceSpec::ModelType::Bpe);
  EXPECT_EQ(model.pieces[0].piece, "<unk>");
  EXPECT_EQ(model.pieces[0].type, PieceType::Unknown);
  EXPECT_EQ(model.pieces[1].type, PieceType::Control);
  EXPECT_EQ(model.pieces[3].piece, "<0x00>");
  EXPECT_EQ(model.pieces[3].type, PieceType::Byte);
  EXPECT_EQ(model.pieces[300].type, PieceType::Normal);
  EXPECT_LT(model.pieces[300].score, model.pieces[299].score + 1e-6f);
  // transformers derives the same merges (spm_json is its conversion of this model).
  auto converted = load_tokenizer(fixture("spm"))->describe();
  auto json = load_tokenizer(fixture("spm_json"))->describe();
  EXPECT_EQ(converted.substr(converted.find("(vocab")), json.substr(json.find("(vocab")))
      << converted << "\n"
      << json;
}

TEST(SentencePiece, TruncatedModelFileIsAFormatError) {
  TempDir dir;
  std::string bytes = testing_util::read(fixture("spm") + "/tokenizer.model");
  dir.write("tokenizer.model", bytes.substr(0, bytes.size() / 2));
  try {
    read_sentencepiece_model(dir.file("tokenizer.model"));
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Format);
    EXPECT_NE(std::string(e.what()).find("not a SentencePiece model"), std::string::npos)
        << e.what();
  }
}

TEST(SentencePiece, RareCharactersFallBackToBytesAndBack) {
  auto tok = load_tokenizer(fixture("spm"));
  const std::string text = "ᚠᛇᚻ 𝔘𝔫𝔦";  // runes and math letters: surely not in 600 pieces
  auto ids = tok->encode(text, {.add_special_tokens = false});
  EXPECT_GE(ids.size(), 12u);  // at least a byte piece per UTF-8 byte of some of them
  for (TokenId id : ids) EXPECT_LT(id, 600);
  EXPECT_EQ(tok->decode(ids), text);
}

TEST(SentencePiece, ConfigTurnsBosOffAndEosOn) {
  TempDir dir;
  std::filesystem::copy_file(fixture("spm") + "/tokenizer.model", dir.file("tokenizer.model"));
  dir.write("tokenizer_config.json", R"({"add_bos_token": false, "add_eos_token": true})");
  auto tok = load_tokenizer(dir.path());
  auto ids = tok->encode("abc");
  ASSERT_FALSE(ids.empty());
  EXPECT_NE(ids.front(), 1);
  EXPECT_EQ(ids.back(), 2);
}

TEST(SentencePiece, TokenizerJsonIsPreferredWhenBothArePresent) {
  TempDir dir;
  std::filesystem::copy_file(fixture("spm") + "/tokenizer.model", dir.file("tokenizer.model"));
  std::filesystem::copy_file(fixture("gpt2") + "/tokenizer.json", dir.file("tokenizer.json"));
  auto tok = load_tokenizer(dir.path());
  EXPECT_NE(tok->describe().find("tokenizer.json"), std::string::npos) << tok->describe();
}

TEST(SentencePiece, ConvertedTokenizerJsonBesideTheModelIsTakenAndGivesTheModelsIds) {
  // A Llama 2 folder: the model's tokenizer.json (converted from tokenizer.model) beside it. dsx
  // takes tokenizer.json, as transformers' AutoTokenizer does; both give the same ids.
  TempDir dir;
  std::filesystem::copy_file(fixture("spm") + "/tokenizer.model", dir.file("tokenizer.model"));
  std::filesystem::copy_file(fixture("spm_json") + "/tokenizer.json", dir.file("tokenizer.json"));
  std::filesystem::copy_file(fixture("spm") + "/tokenizer_config.json", dir.file("tokenizer_config.json"));
  auto tok = load_tokenizer(dir.path());
  EXPECT_NE(tok->describe().find("tokenizer.json"), std::string::npos) << tok->describe();
  const std::string text = "Hello  wörld, 你好 ᚠᛇᚻ!\n  indented 12345";
  EXPECT_EQ(tok->encode(text), load_tokenizer(fixture("spm"))->encode(text));
  EXPECT_EQ(tok->decode(tok->encode(text, {.add_special_tokens = false})), text);
}

TEST(SentencePiece, ModelIsTakenWhenTokenizerJsonIsRefused) {
  // A tokenizer.json dsx does not read (a Unigram model) beside tokenizer.model.
  TempDir dir;
  std::filesystem::copy_file(fixture("spm") + "/tokenizer.model", dir.file("tokenizer.model"));
  std::string json = testing_util::read(fixture("gpt2") + "/tokenizer.json");
  json.replace(json.find("\"type\": \"BPE\""), 13, "\"type\": \"Unigram\"");
  dir.write("tokenizer.json", json);
  auto tok = load_tokenizer(dir.path());
  EXPECT_NE(tok->describe().find("tokenizer.model"), std::string::npos) << tok->describe();
  // A malformed tokenizer.json is still an error, not a silent switch.
  dir.write("tokenizer.json", "{");
  EXPECT_THROW(load_tokenizer(dir.path()), Error);
}

}  // namespace
}  // namespace dsx::tokenizer
