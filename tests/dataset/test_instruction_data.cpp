// Instruction JSONL (--data jsonl:FILE): targets -1 exactly on prompt positions and padding,
// truncation from the right, Alpaca's fields and template, errors naming FILE:LINE and the field.
#include <gtest/gtest.h>

#include "dataset/instruction_data.h"
#include "dsx/error.h"
#include "tests/dataset/dataset_test_util.h"
#include "tests/models/temp_dir.h"

using namespace dsx::dataset;
using dsx::models::Batch;

namespace {

dsx::models::TokenLoaderOptions options(int batch, int seq) {
  dsx::models::TokenLoaderOptions o;
  o.batch = batch, o.seq_len = seq;
  return o;
}

// The ids of prompt + response encoded together (with the tokenizer's special tokens) and where
// the response starts in them: after the prefix that matches the prompt's own encoding (TRL's
// rule, so a SentencePiece-style tokenizer adds no "▁" at the join).
std::pair<std::vector<int32_t>, size_t> joint(const dsx::tokenizer::Tokenizer& tok,
                                              const std::string& prompt, const std::string& response) {
  const auto p = tok.encode(prompt);
  const auto whole = tok.encode(prompt + response);
  size_t start = 0;
  while (start < p.size() && start < whole.size() && p[start] == whole[start]) ++start;
  return {std::vector<int32_t>(whole.begin(), whole.end()), start};
}

// The row an example should make: prompt + response encoded together, EOS; cut to T+1; targets
// only on response tokens.
void expect_row(const dsx::tokenizer::Tokenizer& tok, const std::string& prompt,
                const std::string& response, const Batch& batch, int b) {
  auto [seq, start] = joint(tok, prompt, response);
  seq.push_back(*tok.eos_id());
  const size_t T = batch.T;
  if (seq.size() > T + 1) seq.resize(T + 1);
  for (size_t i = 0; i < T; ++i) {
    const int32_t input = i < seq.size() ? seq[i] : *tok.eos_id();
    const int32_t target = (i + 1 < seq.size() && i + 1 >= start) ? seq[i + 1] : -1;
    ASSERT_EQ(batch.inputs[b * T + i], input) << "position " << i << " of '" << prompt << "'";
    ASSERT_EQ(batch.targets[b * T + i], target) << "position " << i << " of '" << prompt << "'";
  }
}

// Byte-level (GPT-2 style) tokenizers: where nothing merges across the join, the joint encoding
// is the prompt's then the response's encoded apart, as before issue 33 item 4.
void expect_same_as_apart(const dsx::tokenizer::Tokenizer& tok, const std::string& prompt,
                          const std::string& response) {
  auto apart = tok.encode(prompt);
  dsx::tokenizer::EncodeOptions plain;
  plain.add_special_tokens = false;
  const auto r = tok.encode(response, plain);
  const size_t prompt_size = apart.size();
  apart.insert(apart.end(), r.begin(), r.end());
  const auto [seq, start] = joint(tok, prompt, response);
  EXPECT_EQ(seq, std::vector<int32_t>(apart.begin(), apart.end())) << prompt;
  EXPECT_EQ(start, prompt_size) << prompt;
}

std::string error_of(const std::string& path, const dsx::tokenizer::Tokenizer& tok) {
  try {
    make_instruction_loader(path, tok, options(1, 32));
  } catch (const dsx::Error& e) {
    return e.what();
  }
  return "no error";
}

const std::string kAlpacaNoInput =
    "Below is an instruction that describes a task. Write a response that appropriately completes "
    "the "
    "request.\n\n### Instruction:\nName a fox.\n\n### Response:";
const std::string kAlpacaInput =
    "Below is an instruction that describes a task, paired with an input that provides further "
    "context. Write a "
    "response that appropriately completes the request.\n\n### Instruction:\nAdd.\n\n### Input:\n2 "
    "3\n\n### Response:";

}  // namespace

TEST(InstructionData, LossOnlyOnResponseTokensAndPaddingMasked) {
  dsx::test::TempDir dir;
  dsx::test::write_file(dir.file("d.jsonl"),
                        "{\"prompt\": \"Question: hello?\\n\", \"response\": \"Answer: world.\"}\n"
                        "\n"
                        "{\"prompt\": \"Say a word.\", \"completion\": \" fox\"}\n"
                        "{\"instruction\": \"Name a fox.\", \"output\": \" Brown.\"}\n"
                        "{\"instruction\": \"Add.\", \"input\": \"2 3\", \"output\": \" 5\"}\n");
  for (const char* name : {"gpt2", "llama3", "qwen2", "spm"}) {
    auto tok = dsx::test::load_fixture(name);
    auto loader = make_instruction_loader(dir.file("d.jsonl"), *tok, options(4, 300));
    ASSERT_EQ(loader->batches_per_epoch(), 1u);
    EXPECT_EQ(loader->vocab_size(), tok->vocab_size());
    Batch batch;
    loader->next(batch);
    expect_row(*tok, "Question: hello?\n", "Answer: world.", batch, 0);
    expect_row(*tok, "Say a word.", " fox", batch, 1);
    expect_row(*tok, kAlpacaNoInput, " Brown.", batch, 2);
    expect_row(*tok, kAlpacaInput, " 5", batch, 3);
    if (std::string(name) != "spm") {
      expect_same_as_apart(*tok, "Question: hello?\n", "Answer: world.");
      expect_same_as_apart(*tok, "Say a word.", " fox");
      expect_same_as_apart(*tok, kAlpacaNoInput, " Brown.");
      expect_same_as_apart(*tok, kAlpacaInput, " 5");
    }
    // The first row's -1s: one fewer than its prompt tokens, then the padding.
    const auto p = tok->encode("Question: hello?\n");
    EXPECT_EQ(batch.targets[p.size() - 2], -1);
    EXPECT_NE(batch.targets[p.size() - 1], -1);  // the last prompt position predicts the response
  }
}

// Issue 33, item 4: with a SentencePiece-style tokenizer (tokenizer.model, or tokenizer.json with
// the Metaspace pre-tokenizer) the response was encoded apart and so began with a spurious "▁"
// that the model never sees at inference. Its tokens are now those of prompt + response after the
// prompt's, as TRL and transformers give.
TEST(InstructionData, SentencePieceResponseHasNoSpuriousMetaspaceAtTheJoin) {
  dsx::test::TempDir dir;
  dsx::test::write_file(dir.file("d.jsonl"), "{\"prompt\": \"A:\", \"response\": \"Paris\"}\n");
  for (const char* name : {"spm", "spm_json", "spm_json_legacy"}) {
    SCOPED_TRACE(name);
    auto tok = dsx::test::load_fixture(name);
    const auto space = tok->token_to_id("▁");
    auto rows = read_instruction_rows(dir.file("d.jsonl"), *tok, 64);
    ASSERT_EQ(rows->rows(), 1u);
    std::vector<int32_t> inputs(64), targets(64);
    rows->row(0, inputs.data(), targets.data());
    std::vector<int32_t> trained;
    for (int32_t t : targets)
      if (t != -1) trained.push_back(t);
    ASSERT_GE(trained.size(), 2u);
    ASSERT_TRUE(space.has_value());
    EXPECT_NE(trained.front(), *space) << "the response starts with a lone ▁";
    const auto [whole, start] = joint(*tok, "A:", "Paris");
    std::vector<int32_t> expected(whole.begin() + static_cast<std::ptrdiff_t>(start), whole.end());
    expected.push_back(*tok->eos_id());
    EXPECT_EQ(trained, expected);
    EXPECT_EQ(tok->decode(std::vector<int32_t>(trained.begin(), trained.end() - 1)), "Paris");
  }
}

TEST(InstructionData, TruncatesFromTheRightAndLeavesOutPromptOnlyRows) {
  dsx::test::TempDir dir;
  const std::string long_response(400, 'a');
  dsx::test::write_file(dir.file("d.jsonl"),
                        "{\"prompt\": \"Short prompt\", \"response\": \" " + long_response +
                            "\"}\n" + "{\"prompt\": \"" + std::string(300, 'q') +
                            "\", \"response\": \"never seen\"}\n" +
                            "{\"prompt\": \"Hi\", \"response\": \" there\"}\n");
  auto tok = dsx::test::load_fixture("gpt2");
  auto rows = read_instruction_rows(dir.file("d.jsonl"), *tok, 16);
  EXPECT_EQ(rows->rows(), 2u);
  EXPECT_EQ(rows->skipped(), 1u);
  EXPECT_EQ(rows->truncated(), 1u);
  auto loader = make_instruction_loader(dir.file("d.jsonl"), *tok, options(2, 16));
  Batch batch;
  loader->next(batch);
  expect_row(*tok, "Short prompt", " " + long_response, batch, 0);
  EXPECT_NE(batch.targets[15], *tok->eos_id());  // cut: the EOS is gone, every position a target
  expect_row(*tok, "Hi", " there", batch, 1);
}

TEST(InstructionData, BadLinesNameFileLineAndField) {
  dsx::test::TempDir dir;
  auto tok = dsx::test::load_fixture("gpt2");
  const std::string ok = "{\"prompt\": \"a\", \"response\": \"b\"}\n";
  struct Case {
    std::string line, expected;
  } cases[] = {
      {"{\"prompt\": \"a\"}", ":2: missing field 'response'"},
      {"{\"instruction\": \"a\", \"input\": \"b\"}", ":2: missing field 'output'"},
      {"{\"text\": \"a\"}", ":2: missing field 'prompt'"},
      {"{\"prompt\": 3, \"response\": \"b\"}", ":2: field 'prompt' must be a string"},
      {"{\"prompt\": \"a\", ", ":2:17: invalid JSON"},
      {"[1, 2]", ":2: a JSON value that is not an object"},
  };
  for (const auto& c : cases) {
    dsx::test::write_file(dir.file("bad.jsonl"), ok + c.line + "\n" + ok);
    const std::string message = error_of(dir.file("bad.jsonl"), *tok);
    EXPECT_NE(message.find(dir.file("bad.jsonl") + c.expected), std::string::npos) << message;
  }
  dsx::test::write_file(dir.file("empty.jsonl"), "\n\n");
  EXPECT_NE(error_of(dir.file("empty.jsonl"), *tok).find("no examples"), std::string::npos);
  EXPECT_NE(error_of(dir.file("missing.jsonl"), *tok).find("missing.jsonl': cannot open"),
            std::string::npos);
}
