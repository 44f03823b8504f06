// Conversations in instruction JSONL (--data jsonl:FILE with "messages", or TRL's conversational
// "prompt"/"completion"): the rows hold the ids of the text the model's chat template writes,
// and the targets are exactly the assistant's tokens, by {% generation %} blocks or by the
// prefix rule; the expected texts are written out by hand from each template's format.
#include <gtest/gtest.h>

#include <filesystem>

#include "dataset/instruction_data.h"
#include "dsx/error.h"
#include "tests/dataset/dataset_test_util.h"
#include "tests/models/temp_dir.h"

using namespace dsx::dataset;
using dsx::models::Batch;
namespace fs = std::filesystem;

namespace {

using Pieces = std::vector<std::pair<std::string, bool>>;  // text, trained on

// A tokenizer folder: a fixture's files and one of tests/jinja's templates as chat_template.jinja.
std::string chat_folder(const dsx::test::TempDir& dir, const std::string& fixture, const std::string& templ) {
  const fs::path folder = fs::path(dir.path()) / "model";
  fs::create_directories(folder);
  for (const char* file : {"tokenizer.json", "tokenizer_config.json"})
    fs::copy_file(fs::path(dsx::test::fixture_tokenizer(fixture)) / file, folder / file);
  if (!templ.empty())
    fs::copy_file(fs::path(DSX_SOURCE_DIR) / "tests/jinja/data/templates" / templ, folder / "chat_template.jinja");
  return folder.string();
}

// The first batch of `rows` rows of `seq` tokens that --data jsonl:FILE makes with the folder.
Batch first_batch(const std::string& jsonl, const std::string& folder, int rows, int seq) {
  dsx::models::TokenLoaderOptions o;
  o.batch = rows, o.seq_len = seq;
  Batch batch;
  make_instruction_loader(jsonl, folder, o, 1)->next(batch);
  return batch;
}

// Row b of the batch against the pieces encoded by the tokenizer itself, special tokens as ids.
void expect_row(const dsx::tokenizer::Tokenizer& tok, const Pieces& pieces, const Batch& batch, int b) {
  dsx::tokenizer::EncodeOptions templated;
  templated.add_special_tokens = false;
  std::vector<int32_t> ids;
  std::vector<bool> trained;
  for (const auto& [text, target] : pieces) {
    tok.encode_into(text, templated, ids);
    trained.resize(ids.size(), target);
  }
  const size_t T = batch.T;
  ASSERT_LE(ids.size(), T + 1) << "the expected example is cut; make the row longer";
  for (size_t i = 0; i < T; ++i) {
    const int32_t input = i < ids.size() ? ids[i] : *tok.eos_id();
    const int32_t target = i + 1 < ids.size() && trained[i + 1] ? ids[i + 1] : -1;
    ASSERT_EQ(batch.inputs[b * T + i], input) << "row " << b << " position " << i;
    ASSERT_EQ(batch.targets[b * T + i], target) << "row " << b << " position " << i;
  }
}

std::string error_of(const std::string& jsonl, const std::string& folder) {
  try {
    first_batch(jsonl, folder, 1, 64);
  } catch (const dsx::Error& e) {
    return e.what();
  }
  return "no error";
}

const std::string kTwoTurns =
    R"({"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hello?"}, )"
    R"({"role": "assistant", "content": "Hi there."}, {"role": "user", "content": "Name a fox."}, )"
    R"({"role": "assistant", "content": "Brown."}]})"
    "\n";
const std::string kOneTurn =
    R"({"messages": [{"role": "user", "content": "Hello?"}, {"role": "assistant", "content": "Hi there."}]})"
    "\n";

}  // namespace

TEST(ChatData, Llama3TrainsOnEachAssistantTurnThroughItsEndOfTurn) {
  dsx::test::TempDir dir;
  const std::string folder = chat_folder(dir, "llama3", "llama3.jinja");
  dsx::test::write_file(dir.file("d.jsonl"), kTwoTurns);
  const Batch batch = first_batch(dir.file("d.jsonl"), folder, 1, 128);
  const std::string header = "<|start_header_id|>", end = "<|end_header_id|>\n\n";
  expect_row(*dsx::tokenizer::load_tokenizer(folder),
             {{"<|begin_of_text|>" + header + "system" + end + "Be brief.<|eot_id|>" + header + "user" + end +
                   "Hello?<|eot_id|>" + header + "assistant" + end,
               false},
              {"Hi there.<|eot_id|>", true},
              {header + "user" + end + "Name a fox.<|eot_id|>" + header + "assistant" + end, false},
              {"Brown.<|eot_id|>", true}},
             batch, 0);
  // The template writes BOS once and no EOS is added: the row ends at the last <|eot_id|>.
  const auto tok = dsx::tokenizer::load_tokenizer(folder);
  EXPECT_EQ(batch.inputs[0], *tok->bos_id());
  EXPECT_NE(batch.inputs[1], *tok->bos_id());
}

TEST(ChatData, GenerationBlocksMarkTheTrainedText) {
  dsx::test::TempDir dir;
  const std::string folder = chat_folder(dir, "qwen2", "chatml_generation.jinja");
  dsx::test::write_file(dir.file("d.jsonl"), kOneTurn);
  const Batch batch = first_batch(dir.file("d.jsonl"), folder, 1, 64);
  // The block holds the content and <|im_end|>, not the newline after it.
  expect_row(*dsx::tokenizer::load_tokenizer(folder),
             {{"<|im_start|>user\nHello?<|im_end|>\n<|im_start|>assistant\n", false},
              {"Hi there.<|im_end|>", true},
              {"\n", false}},
             batch, 0);
}

TEST(ChatData, PrefixRuleWithADefaultSystemPromptAndTrlPromptCompletion) {
  dsx::test::TempDir dir;
  const std::string folder = chat_folder(dir, "qwen2", "chatml.jinja");
  dsx::test::write_file(dir.file("d.jsonl"),
                        kOneTurn +
                            R"({"prompt": [{"role": "user", "content": "2+3?"}], )"
                            R"("completion": [{"role": "assistant", "content": "5"}]})"
                            "\n"
                            R"({"prompt": "Plain text ", "response": "still works"})"
                            "\n");
  const Batch batch = first_batch(dir.file("d.jsonl"), folder, 3, 64);
  const auto tok = dsx::tokenizer::load_tokenizer(folder);
  const std::string system = "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n";
  expect_row(*tok, {{system + "<|im_start|>user\nHello?<|im_end|>\n<|im_start|>assistant\n", false},
                    {"Hi there.<|im_end|>\n", true}},
             batch, 0);
  expect_row(*tok, {{system + "<|im_start|>user\n2+3?<|im_end|>\n<|im_start|>assistant\n", false},
                    {"5<|im_end|>\n", true}},
             batch, 1);
  // A text line in the same file keeps the text rules: special strings as text, EOS added,
  // prompt + response encoded together; the prompt's trailing " " merges into " still", which
  // goes with the response (issue 33, item 4, TRL's rule).
  dsx::tokenizer::EncodeOptions plain;
  plain.add_special_tokens = false, plain.split_special_tokens = true;
  const auto prompt = tok->encode("Plain text ", plain), whole = tok->encode("Plain text still works", plain);
  size_t start = 0;
  while (start < prompt.size() && start < whole.size() && prompt[start] == whole[start]) ++start;
  EXPECT_EQ(start + 1, prompt.size());
  EXPECT_EQ(batch.inputs[2 * 64 + whole.size()], *tok->eos_id());
  EXPECT_EQ(batch.targets[2 * 64 + whole.size() - 1], *tok->eos_id());
  EXPECT_EQ(batch.targets[2 * 64 + start - 2], -1);
  EXPECT_EQ(batch.targets[2 * 64 + start - 1], whole[start]);
}

TEST(ChatData, ConversationsWithNoAssistantTokenWithinSeqLenAreLeftOut) {
  dsx::test::TempDir dir;
  const std::string folder = chat_folder(dir, "qwen2", "chatml_generation.jinja");
  dsx::test::write_file(dir.file("d.jsonl"),
                        R"({"messages": [{"role": "user", "content": ")" + std::string(200, 'q') +
                            R"("}, {"role": "assistant", "content": "never seen"}]})" + "\n" + kOneTurn);
  auto tok = dsx::tokenizer::load_tokenizer(folder);
  auto chat = dsx::tokenizer::read_chat_template(folder);
  ASSERT_TRUE(chat);
  auto rows = read_instruction_rows(dir.file("d.jsonl"), *tok, 32, 1, &*chat);
  EXPECT_EQ(rows->rows(), 1u);
  EXPECT_EQ(rows->skipped(), 1u);
}

TEST(ChatData, ErrorsNameTheLineAndWhatToDo) {
  dsx::test::TempDir dir;
  const std::string with_template = chat_folder(dir, "qwen2", "chatml.jinja");
  dsx::test::TempDir bare;
  const std::string without = chat_folder(bare, "gpt2", "");
  const std::string ok = R"({"prompt": "a", "response": "b"})" "\n";
  struct Case {
    std::string line, folder, expected;
  } cases[] = {
      {kOneTurn, without, ":2: a conversation needs the model's chat template"},
      {R"({"messages": "hello"})", with_template, ":2: field 'messages' must be a non-empty list"},
      {R"({"messages": []})", with_template, ":2: field 'messages' must be a non-empty list"},
      {R"({"messages": [{"content": "x"}]})", with_template, ":2: messages[0] must be an object with a string \"role\""},
      {R"({"prompt": [{"role": "user", "content": "x"}]})", with_template, ":2: missing field 'completion'"},
      {R"({"prompt": [{"role": "user", "content": "x"}], "completion": "y"})", with_template,
       ":2: field 'completion' must be a non-empty list"},
  };
  for (const auto& c : cases) {
    dsx::test::write_file(dir.file("e.jsonl"), ok + c.line + "\n");
    const std::string error = error_of(dir.file("e.jsonl"), c.folder);
    EXPECT_NE(error.find(c.expected), std::string::npos) << c.line << " -> " << error;
  }
}

TEST(ChatData, TemplatesThatRewriteEarlierTurnsAskForGenerationBlocks) {
  dsx::test::TempDir dir;
  const std::string folder = chat_folder(dir, "qwen2", "");
  // Drops what the assistant said in every turn but the last, as reasoning models' templates do.
  dsx::test::write_file(folder + "/chat_template.jinja",
                        "{% for m in messages %}{% if m.role == 'assistant' and not loop.last %}[earlier]"
                        "{% else %}{{ m.content }}{% endif %}{% endfor %}");
  dsx::test::write_file(dir.file("d.jsonl"),
                        R"({"messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"},)"
                        R"( {"role": "user", "content": "c"}, {"role": "assistant", "content": "d"}]})"
                        "\n");
  const std::string error = error_of(dir.file("d.jsonl"), folder);
  EXPECT_NE(error.find("d.jsonl:1: chat template"), std::string::npos) << error;
  EXPECT_NE(error.find("does not render the first 2 messages"), std::string::npos) << error;
  EXPECT_NE(error.find("{% generation %}"), std::string::npos) << error;
}
